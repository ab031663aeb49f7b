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
