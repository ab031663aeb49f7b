import type { LibsqlError } from "@libsql/client";

/**
 * Whether an error came from the database client (busy, locked, read-only, closed, a remote
 * server away) rather than from our own code, so a caller can answer "unavailable, try again"
 * instead of an internal error. Checked by name, not `instanceof`: the local and the web client
 * (docs/deploy.md) each bring their own copy of the class, and importing the local client here
 * would load its native part where there is none.
 */
export function isDatabaseError(err: unknown): err is LibsqlError {
  return err instanceof Error && (err.name === "LibsqlError" || err.name === "LibsqlBatchError");
}

/**
 * Errors that belong to the rows rather than to the database being away, so retrying the same
 * rows would fail forever. Outages (busy, locked, read-only, network) are never in this set.
 */
export function isRowProblem(err: unknown): boolean {
  const code = err instanceof Error && "code" in err ? err.code : undefined;
  return typeof code === "string" && /^SQLITE_(CONSTRAINT|MISMATCH|TOOBIG|RANGE)/.test(code);
}
