import type { GatewayError } from "../gateway_error.ts";
import { isRecord, parseJson } from "../sse_frames.ts";
import { upstreamStatusError } from "../upstream_error.ts";

/**
 * Anthropic's documented error types by HTTP status. 499 has no Anthropic
 * equivalent: an abort or a departed caller is neither the caller's bad
 * request nor a rate limit, so it renders as the generic `api_error`, and
 * the `gw.*` code in `details.error_code` says which it was.
 */
const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  409: "conflict_error",
  413: "request_too_large",
  429: "rate_limit_error",
  499: "api_error",
  500: "api_error",
  502: "api_error",
  503: "overloaded_error",
  504: "timeout_error",
  529: "overloaded_error",
};

/** Types an Anthropic SDK knows; an upstream's type outside this set is re-derived from the status. */
const knownTypes = new Set(Object.values(typeByStatus));

/** Our timeouts are timeouts whatever status `timeout_status` gives them (SPEC §4). */
const timeoutCodes = new Set([
  "gw.upstream.idle_timeout",
  "gw.upstream.idle_timeout_mid_stream",
  "gw.upstream.deadline",
]);

export function anthropicErrorType(err: GatewayError): string {
  if (timeoutCodes.has(err.code)) return "timeout_error";
  if (err.source === "client" && err.upstreamType && knownTypes.has(err.upstreamType)) {
    return err.upstreamType;
  }
  return typeByStatus[err.status] ?? (err.status >= 500 ? "api_error" : "invalid_request_error");
}

/**
 * The Anthropic error body. The gateway code rides in `error.details.error_code`,
 * which the official SDK surfaces as `APIError.errorCode` and older SDKs keep
 * in `APIError.error`; `message` stays the plain public message.
 */
export function anthropicError(err: GatewayError): Record<string, unknown> {
  return {
    type: "error",
    error: {
      type: anthropicErrorType(err),
      message: err.publicMessage,
      details: { error_code: err.code },
    },
  };
}

/** The status Anthropic answers with for each error type, for errors met inside a stream. */
const statusByType: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** An `event: error` from an Anthropic upstream, classified like the same error as a status. */
export function anthropicStreamError(data: string | undefined): GatewayError {
  const body = parseJson(data);
  const inner = isRecord(body) && isRecord(body.error) ? body.error : {};
  const status = typeof inner.type === "string" ? statusByType[inner.type] ?? 500 : 500;
  return upstreamStatusError(status, { body: data ?? "" });
}
