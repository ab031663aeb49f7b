import { baseHeaders, errorResponse } from "../forward/client_channel.ts";
import type { ClientCodec } from "../formats/format.ts";
import { CLIENT_CODECS } from "../formats/formats.ts";
import { ERROR_CODE_HEADER, type GatewayError } from "../runtime/gateway_error.ts";

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
  if (/^\/v1(?:beta)?\/interactions(?:\/|$)/.test(path)) return CLIENT_CODECS.interactions;
  if (/^\/v1beta(?:\/|$)/.test(path)) return CLIENT_CODECS.gemini;
  if (/^\/v1\/messages(?:\/|$)/.test(path)) return CLIENT_CODECS.anthropic;
  if (/^\/v1\/responses(?:\/|$)/.test(path)) return CLIENT_CODECS.responses;
  if (/^\/v1\/chat(?:\/|$)/.test(path)) return CLIENT_CODECS.chat;
  if (/^\/v1\/embeddings(?:\/|$)/.test(path)) return CLIENT_CODECS.chat;
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
