import type { Hono } from "hono";
import { errorFor } from "../accept/caller_errors.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import type { Logger } from "../runtime/logger.ts";

/** 404 for a path no route serves. */
export function notFound(request: Request, message?: string): Response {
  const { pathname } = new URL(request.url);
  const err = clientError(message ?? `no such endpoint: ${request.method} ${pathname}`, {
    code: "gw.client.not_found",
  });
  return errorFor(request, err);
}

/** 405 with `Allow`, for a served path asked with another method. */
export function methodNotAllowed(request: Request, allow: string[]): Response {
  const { pathname } = new URL(request.url);
  const err = clientError(
    `${request.method} is not allowed on ${pathname}; use ${allow.join(" or ")}`,
    { code: "gw.client.method_not_allowed", status: 405 },
  );
  const response = errorFor(request, err);
  response.headers.set("allow", allow.join(", "));
  return response;
}

/** Answers 405 for the methods a path's handlers do not take; register after those handlers. */
export function refuseOtherMethods(app: Hono, opts: { paths: string[]; allow: string[] }): void {
  for (const path of opts.paths) app.all(path, (c) => methodNotAllowed(c.req.raw, opts.allow));
}

/** What escaped a route's handler: its answer in the caller's format, and a log line for a 5xx. */
export function unhandledError(request: Request, opts: { err: unknown; log: Logger }): Response {
  const error = GatewayError.from(opts.err);
  if (error.status >= 500) {
    const { pathname } = new URL(request.url);
    const message = opts.err instanceof Error ? opts.err.message : String(opts.err);
    opts.log.event("http.unhandled_error", { path: pathname, error: message });
  }
  return errorFor(request, error);
}

/**
 * Hono's fallbacks in the caller's format: no plain-text 404 or 500 on any
 * path. A thrown error is logged (message only: bodies and keys stay out of
 * logs) and answered as the gateway's own fault. Call before any route is
 * added: the guard below must wrap them all.
 */
export function installFallbacks(app: Hono, opts: { log: Logger }): void {
  app.notFound((c) => notFound(c.req.raw));
  app.onError((err, c) => unhandledError(c.req.raw, { err, log: opts.log }));
  // Hono hands only Error instances to onError; anything else thrown would reach the
  // runtime's own text 500, so it is turned into an Error on the way out.
  app.use(async (_c, next) => {
    try {
      await next();
    } catch (err) {
      throw err instanceof Error ? err : new Error(String(err));
    }
  });
}
