import type { GatewayError } from "../../runtime/gateway_error.ts";
import { isRecord } from "../../runtime/json.ts";
import { geminiError } from "../gemini/errors.ts";
import { upstreamStatusError } from "../upstream_error.ts";
import { numberOf, stringOf } from "../gemini/fields.ts";

/**
 * An HTTP error of the Interactions API is Google's google.rpc error object, the same as
 * generateContent's (`{"error": {code, message, status, details}}`): the SDK reads
 * `error.message`, and the gateway's code rides in the ErrorInfo detail.
 */
export const interactionsError = geminiError;

/**
 * The `error` event that ends a stream after the 200 (docs/interactions.md "Errors"): Google's
 * documented shape, `{"error": {"message", "code"}, "event_type": "error"}`, whose `code` is a
 * word, not a status (typed SDKs read it as a string); ours is the gateway's code, so a client
 * can tell an idle timeout from an upstream failure. The google.rpc `status` and `details` of
 * the HTTP error ride beside it, so an upstream's refusal keeps its meaning in a stream too.
 */
export function interactionsErrorEvent(err: GatewayError): Record<string, unknown> {
  const { error } = geminiError(err);
  return {
    error: { ...error, code: err.code, message: err.publicMessage },
    event_type: "error",
  };
}

/**
 * The words Google's error events use, as the HTTP status the shared classifier reads: a rate
 * limit is the upstream's, a bad request the caller's, a timeout a timeout, anything else a
 * server error. Google's example of one is `gateway_timeout`.
 */
function statusOfWord(word: string): number {
  const w = word.toLowerCase();
  if (/rate|quota|exhausted|too_many/.test(w)) return 429;
  if (/timeout|deadline/.test(w)) return 504;
  if (/invalid|bad_request|argument|precondition|not_found|too_long|too_large/.test(w)) {
    return 400;
  }
  if (/unavailable|overloaded/.test(w)) return 503;
  return 500;
}

/** Reads the error of an upstream `error` event (or of a bare google.rpc object in a stream). */
export function interactionsStreamFailure(error: unknown): GatewayError {
  const e = isRecord(error) ? error : {};
  const message = stringOf(e.message) ?? "the upstream reported a failure";
  const numeric = numberOf(e.code);
  const word = stringOf(e.code) ?? stringOf(e.status);
  const status = numeric !== undefined && numeric >= 400 && numeric < 600
    ? numeric
    : word !== undefined
    ? statusOfWord(word)
    : 500;
  const body = JSON.stringify({ error: { code: status, message, status: stringOf(e.status) } });
  return upstreamStatusError(status, { body, kind: "gemini-interactions" });
}
