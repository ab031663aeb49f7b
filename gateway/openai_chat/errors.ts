import type { GatewayError } from "../gateway_error.ts";

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "conflict_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
  499: "request_cancelled",
  503: "service_unavailable",
  504: "timeout_error",
};

/** The OpenAI error object, shared by Chat Completions and Responses clients. */
export function openAiError(err: GatewayError): { error: Record<string, unknown> } {
  const type = err.source === "client" && err.upstreamType
    ? err.upstreamType
    : typeByStatus[err.status] ?? (err.status >= 500 ? "server_error" : "invalid_request_error");
  return {
    error: { message: err.publicMessage, type, param: err.param ?? null, code: err.code },
  };
}
