import type { ErrorHandler } from "hono";
import { isDatabaseError } from "../db/database_error.ts";
import type { Logger } from "../gateway/runtime/logger.ts";

/** The most of an unexpected error's message an answer or a log line carries. */
const MAX_MESSAGE_CHARS = 500;

export interface DatabaseErrorDeps {
  /** Why there is no database to read (none on this platform, or a remote one away); null when there is. */
  notice: () => string | null;
  log?: Logger;
}

/**
 * Admin endpoints fail when the database cannot answer: a client error (busy, locked, read-only,
 * a remote server away), or any failure while there is no database at all (docs/deploy.md). Both
 * answer 503 `admin.database_unavailable` with the reason (docs/admin.md), never a bare 500; for
 * a change the message says it was not stored. Any other error is a 500 `admin.internal` in the
 * same JSON shape, logged, so a script or the page always reads `{"error": {code, message}}`
 * (docs/security.md "Names are bounded").
 */
export function databaseErrorHandler(deps: DatabaseErrorDeps): ErrorHandler {
  return (err, c) => {
    if ("getResponse" in err && typeof err.getResponse === "function") {
      return err.getResponse() as Response;
    }
    const why = deps.notice();
    if (why === null && !isDatabaseError(err)) {
      const error = err.message.slice(0, MAX_MESSAGE_CHARS);
      if (deps.log) deps.log.event("admin.internal", { path: new URL(c.req.url).pathname, error });
      else console.error(err);
      const message = `the gateway could not answer this admin request: ${error}`;
      return c.json({ error: { code: "admin.internal", message } }, 500);
    }
    deps.log?.event("admin.database_unavailable", {
      path: new URL(c.req.url).pathname,
      error: err.message,
    });
    const change = c.req.method === "GET" || c.req.method === "HEAD"
      ? ""
      : " The change was not stored and nothing changed.";
    const reason = why ?? "the database is unavailable, try again.";
    return c.json({ error: { code: "admin.database_unavailable", message: reason + change } }, 503);
  };
}
