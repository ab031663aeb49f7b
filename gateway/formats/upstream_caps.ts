import { GatewayError } from "../runtime/gateway_error.ts";
import { joinBytes } from "../runtime/join_bytes.ts";

/**
 * How many bytes the gateway takes from an upstream, in one place
 * (docs/security.md, "Upstream bytes are capped"). An upstream is trusted to
 * answer, not to be bounded: a broken or hostile one could otherwise make the
 * gateway hold (and rescan) any amount of memory for one request.
 */
export const UPSTREAM_CAPS = {
  /**
   * One streamed event (an SSE block, or a Bedrock event-stream message),
   * and so any line in it. 16 MiB is the largest message AWS's own event
   * stream allows; it leaves room for the inline images Gemini and the
   * Responses API send base64-encoded in a single event.
   */
  eventBytes: 16 * 1024 * 1024,
  /** A whole (non-streamed) answer: the same as the request body limit. */
  answerBytes: 32 * 1024 * 1024,
  /**
   * An embeddings answer is capped per call by what its inputs could be answered
   * (`answerCap` in embeddings.ts), at this many bytes a value: the longest text of a
   * float32 value as a double (23 characters, `-1.1754943508222875e-38`), a comma, a
   * newline and the indentation of a pretty-printed answer (Gemini's: 8 spaces), with room.
   * Typical answers take 11 to 23; base64, which OpenAI-kind upstreams are asked for, 5⅓.
   */
  embeddingValueBytes: 40,
  /** An error answer: only its message is read, so the rest is dropped unread. */
  errorBodyBytes: 64 * 1024,
} as const;

/**
 * An upstream that sent more than a cap: a failed hop like any answer the
 * gateway cannot read (before content it fails over, after content the
 * client's stream ends with its error event).
 */
export function oversized(what: string, cap: number): GatewayError {
  return new GatewayError(`the upstream sent ${what} over the gateway's cap of ${cap} bytes`, {
    code: "gw.upstream.oversized",
  });
}

/**
 * An answer's text, at most `cap` bytes of it: for answers of which only the
 * start is wanted (an error's message, a token count). The rest is not read
 * and the body is cancelled, which drops the connection.
 */
export async function readCapped(res: Response, cap: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < cap) {
      const { done, value } = await reader.read();
      if (done) break;
      const part = value.subarray(0, cap - size);
      chunks.push(part);
      size += part.byteLength;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return joinBytes(chunks);
}
