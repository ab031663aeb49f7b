import type { Context, ErrorHandler } from "hono";
import { isDatabaseError } from "../db/database_error.ts";
import { QueryTooLargeError, ReaderClosedError } from "../db/read_db.ts";
import { ReadersBusyError } from "../db/worker_reads.ts";
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
    if (err instanceof QueryTooLargeError) return tooLarge(c, { err, log: deps.log });
    const why = deps.notice();
    const readerAway = err instanceof ReadersBusyError || err instanceof ReaderClosedError;
    if (why === null && !isDatabaseError(err) && !readerAway) {
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
    const reason = why ?? (readerAway ? err.message : "the database is unavailable, try again.");
    return c.json({ error: { code: "admin.database_unavailable", message: reason + change } }, 503);
  };
}

/**
 * What narrows each bounded read (docs/scaling.md "Admin reads"): the filters its API takes that
 * shrink the rows read, named as the page and the query string name them.
 */
const NARROWER: Record<string, string> = {
  "/admin/api/costs": "Choose a shorter period (a later `since`, or an `until`).",
  "/admin/api/trends": "Choose a shorter window, or filter by `route` or `upstream`.",
  "/admin/api/requests":
    "Narrow it with a time range (`since`, `until`), a `route`, an `upstream` or a `session`.",
  "/admin/api/sessions": "Choose a shorter window (a later `since`).",
};

/**
 * A read stopped at its bound: 503 `admin.query_too_large`, saying what was too large and which
 * filter narrows it. The same question asked again would be stopped again, hence the advice.
 */
function tooLarge(c: Context, opts: { err: QueryTooLargeError; log?: Logger }): Response {
  const path = new URL(c.req.url).pathname;
  const narrower = NARROWER[path] ??
    (path.startsWith("/admin/api/requests/")
      ? "Try again; a single request should never be this slow."
      : "Narrow the query.");
  opts.log?.event("admin.query_too_large", { path, bound_ms: opts.err.boundMs });
  const message = `This query is too large: it read history for longer than its bound of ` +
    `${opts.err.boundMs} ms and was stopped. ${narrower}`;
  return c.json({ error: { code: "admin.query_too_large", message } }, 503);
}
