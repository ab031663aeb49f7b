import { clientStatus, geminiStatusName, translatedWords } from "../error_vocab.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";

/**
 * The Gemini error object. The gateway code rides in a google.rpc.ErrorInfo
 * detail (`reason`, domain "pulsegate"): that is where Google itself puts
 * machine-readable reasons, and the SDKs pass `details` through untouched.
 * A provider's error translated from another format keeps its own words in
 * that detail's metadata.
 */
export function geminiError(err: GatewayError): { error: Record<string, unknown> } {
  const status = geminiStatusName(err);
  const details: Record<string, unknown>[] = [{
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    reason: err.code,
    domain: "pulsegate",
    metadata: { source: err.source, ...translatedWords(err, "gemini") },
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
  const code = clientStatus(err, "gemini");
  return { error: { code, message: err.publicMessage, status, details } };
}
