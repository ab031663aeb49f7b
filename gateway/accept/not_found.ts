import type { Hono } from "hono";
import { baseHeaders, errorResponse } from "../forward/client_channel.ts";
import type { ClientCodec } from "../formats/format.ts";
import { CLIENT_CODECS } from "../formats/formats.ts";
import { clientError, ERROR_CODE_HEADER, GatewayError } from "../runtime/gateway_error.ts";
import type { Logger } from "../runtime/logger.ts";

/** The operator's surface: admin page and API, control, health, demo upstreams. */
const OPERATOR_PATH = /^\/(?:admin|request|sessions|metrics|healthz|readyz|_demo)(?:\/|$)/;

/** A Gemini method after the model: `/v1/models/{model}:generateContent`. */
const GEMINI_METHOD_PATH = /^\/v1\/models\/.*:[A-Za-z]+$/;

/**
 * The client format a request expects its errors in, read from its path and,
 * where the path is shared or unknown, from the headers its SDK sends; null
 * for the operator's surface, whose errors are plain `{"error": {code, message}}`.
 */
export function clientCodecOf(request: Request): ClientCodec | null {
  const path = new URL(request.url).pathname;
  if (OPERATOR_PATH.test(path)) return null;
  if (/^\/v1beta(?:\/|$)/.test(path)) return CLIENT_CODECS.gemini;
  if (/^\/v1\/messages(?:\/|$)/.test(path)) return CLIENT_CODECS.anthropic;
  if (/^\/v1\/responses(?:\/|$)/.test(path)) return CLIENT_CODECS.responses;
  if (/^\/v1\/chat(?:\/|$)/.test(path)) return CLIENT_CODECS.chat;
  // `/v1/models` is every SDK's; the SDKs' own headers tell them apart.
  if (request.headers.has("x-goog-api-key")) return CLIENT_CODECS.gemini;
  if (request.headers.has("anthropic-version")) return CLIENT_CODECS.anthropic;
  if (GEMINI_METHOD_PATH.test(path)) return CLIENT_CODECS.gemini;
  return CLIENT_CODECS.chat;
}

/** An error outside a proxied request, in the shape the caller's client reads. */
export function errorFor(request: Request, err: GatewayError): Response {
  const requestId = crypto.randomUUID();
  const codec = clientCodecOf(request);
  if (codec) return errorResponse(codec, err, { requestId });
  return plainErrorResponse(err, { requestId });
}

/** The operator surface's error: `{"error": {code, message}}`, with the gateway's error headers. */
export function plainErrorResponse(err: GatewayError, opts: { requestId: string }): Response {
  return new Response(JSON.stringify({ error: { code: err.code, message: err.publicMessage } }), {
    status: err.status,
    headers: baseHeaders(opts.requestId, {
      "content-type": "application/json",
      "x-pulsegate-error": err.source,
      [ERROR_CODE_HEADER]: err.code,
    }),
  });
}

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

/**
 * Hono's fallbacks in the caller's format: no plain-text 404 or 500 on any
 * path. A thrown error is logged (message only: bodies and keys stay out of
 * logs) and answered as the gateway's own fault. Call before any route is
 * added: the guard below must wrap them all.
 */
export function installFallbacks(app: Hono, opts: { log: Logger }): void {
  app.notFound((c) => notFound(c.req.raw));
  app.onError((err, c) => {
    const error = GatewayError.from(err);
    if (error.status >= 500) {
      const { pathname } = new URL(c.req.url);
      opts.log.event("http.unhandled_error", { path: pathname, error: err.message });
    }
    return errorFor(c.req.raw, error);
  });
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
