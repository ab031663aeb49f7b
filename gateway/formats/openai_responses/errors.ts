import { openAiWords, responsesStreamCode } from "../error_vocab.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";
import { isRecord } from "../../runtime/json.ts";
import { upstreamStatusError } from "../upstream_error.ts";

/**
 * `response.error` of a `response.failed` event sent to a client. Its `code`
 * is the gateway's code (docs/design.md "Client API"), so a client can tell an idle timeout from
 * an upstream failure; an upstream's own error passed on keeps the
 * provider's code (mapped into OpenAI's words) where it has one. An operator's stop says
 * `invalid_prompt`, with the gateway's code in `gateway_code` (docs/design.md "Abort and disconnect").
 */
export function failedResponseError(
  err: GatewayError,
): { code: string; message: string; gateway_code?: string } {
  // Codex re-sends a turn whose stream failed with any code but a provider's few it knows as
  // final: an operator's stop says one of those, and its own code beside it.
  const final = responsesStreamCode(err);
  if (final) return { code: final, message: err.publicMessage, gateway_code: err.code };
  return { code: openAiWords(err).code, message: err.publicMessage };
}

/**
 * Reads the error of an upstream `response.failed` or `error` event. The
 * Responses API reports mainly a code there, so the code picks the status the
 * shared classifier sees: rate limits are the upstream's, a bad prompt or
 * image is the caller's, anything else a server error.
 */
export function responsesStreamFailure(error: unknown): GatewayError {
  const e = isRecord(error) ? error : {};
  const code = typeof e.code === "string" ? e.code : undefined;
  const message = typeof e.message === "string" ? e.message : "the upstream reported a failure";
  const type = typeof e.type === "string" && e.type !== "error" ? e.type : undefined;
  const param = typeof e.param === "string" ? e.param : undefined;
  const body = JSON.stringify({ error: { message, type, code, param } });
  return upstreamStatusError(statusOfCode(code), { body, kind: "openai-responses" });
}

function statusOfCode(code: string | undefined): number {
  if (code === undefined || code === "server_error") return 500;
  if (code.includes("rate_limit") || code.includes("quota")) return 429;
  if (code.includes("timeout")) return 504;
  return 400;
}
