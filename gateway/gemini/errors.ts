import type { GatewayError } from "../gateway_error.ts";

/** google.rpc.Code names, by the HTTP status Google pairs them with. */
const statusByHttp: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  405: "UNIMPLEMENTED",
  409: "ALREADY_EXISTS",
  413: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  501: "UNIMPLEMENTED",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

const knownStatuses = new Set([
  ...Object.values(statusByHttp),
  "FAILED_PRECONDITION",
  "OUT_OF_RANGE",
  "ABORTED",
  "DATA_LOSS",
  "UNKNOWN",
]);

/** The google.rpc status string for an HTTP status. */
export function geminiStatus(httpStatus: number): string {
  return statusByHttp[httpStatus] ?? (httpStatus >= 500 ? "INTERNAL" : "FAILED_PRECONDITION");
}

/**
 * The Gemini error object. The gateway code rides in a google.rpc.ErrorInfo
 * detail (`reason`, domain "pulsegate"): that is where Google itself puts
 * machine-readable reasons, and the SDKs pass `details` through untouched.
 */
export function geminiError(err: GatewayError): { error: Record<string, unknown> } {
  // A caller's error passed on from a Gemini upstream keeps the upstream's own status.
  const status = err.source === "client" && err.upstreamType && knownStatuses.has(err.upstreamType)
    ? err.upstreamType
    : geminiStatus(err.status);
  const details: Record<string, unknown>[] = [{
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    reason: err.code,
    domain: "pulsegate",
    metadata: { source: err.source },
  }];
  if (err.param !== undefined) {
    details.push({
      "@type": "type.googleapis.com/google.rpc.BadRequest",
      fieldViolations: [{ field: err.param, description: err.publicMessage }],
    });
  }
  if (err.retryAfterSecs !== undefined) {
    details.push({
      "@type": "type.googleapis.com/google.rpc.RetryInfo",
      retryDelay: `${Math.max(1, Math.ceil(err.retryAfterSecs))}s`,
    });
  }
  return { error: { code: err.status, message: err.publicMessage, status, details } };
}
