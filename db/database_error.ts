import { LibsqlError } from "@libsql/client";

/**
 * Whether an error came from the database client (busy, locked, read-only, closed, a remote
 * server away) rather than from our own code, so a caller can answer "unavailable, try again"
 * instead of an internal error.
 */
export function isDatabaseError(err: unknown): boolean {
  return err instanceof LibsqlError;
}
