import { anthropicType, translatedWords } from "../error_vocab.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { upstreamStatusError } from "../upstream_error.ts";

/**
 * The Anthropic error body. The gateway code rides in `error.details.error_code`,
 * which the official SDK surfaces as `APIError.errorCode` and older SDKs keep
 * in `APIError.error`; `message` stays the plain public message. A provider's
 * error translated from another format keeps its own words in `details` too.
 */
export function anthropicError(err: GatewayError): Record<string, unknown> {
  return {
    type: "error",
    error: {
      type: anthropicType(err),
      message: err.publicMessage,
      details: { error_code: err.code, ...translatedWords(err, "anthropic") },
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
  return upstreamStatusError(status, { body: data ?? "", kind: "anthropic" });
}
