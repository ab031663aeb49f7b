import type { UpstreamKind } from "./format.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";

/**
 * How each provider refuses a prompt longer than its model's context window
 * (docs/liveness.md). Only OpenAI has a code for it; the others say it in the
 * message of their generic invalid-request error, so each is read by its own
 * error type and its own wording (real bodies: tests/fixtures/context_overflow/).
 */
interface Refusal {
  /** The provider's error type the refusal comes under (undefined: any). */
  type?: string;
  /** The provider's code that says it alone (OpenAI `code`). */
  code?: string;
  message: RegExp;
}

const OPENAI: Refusal = {
  type: "invalid_request_error",
  code: "context_length_exceeded",
  // Chat: "This model's maximum context length is 4097 tokens. However, ..." (OpenAI and the
  // servers that copy its words: vLLM, DeepSeek); Responses: "Your input exceeds the context window
  // of this model."
  message: /maximum context length is \d+|exceeds the context window/i,
};

const REFUSALS: Record<UpstreamKind, Refusal> = {
  "openai-chat": OPENAI,
  "openai-responses": OPENAI,
  // "prompt is too long: 208310 tokens > 200000 maximum"; with max_tokens counted in:
  // "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, ...".
  "anthropic": {
    type: "invalid_request_error",
    message: /prompt is too long|exceed context limit/i,
  },
  // "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."
  "gemini": {
    type: "INVALID_ARGUMENT",
    message: /input token count.*exceeds the maximum number of tokens/i,
  },
  // The Interactions API is Gemini's models behind another path: the same refusal.
  "gemini-interactions": {
    type: "INVALID_ARGUMENT",
    message: /input token count.*exceeds the maximum number of tokens/i,
  },
  // "Input is too long for requested model."; Claude on Bedrock relays Anthropic's words:
  // "The model returned the following errors: prompt is too long: 227255 tokens > 200000 maximum".
  "bedrock": {
    type: "ValidationException",
    message: /input is too long for requested model|prompt is too long/i,
  },
};

/**
 * Whether an upstream's error passed on to the caller is its refusal of an
 * over-long prompt. Our own errors and the upstream's failures (5xx, 429)
 * never are: a larger window cannot help those.
 */
export function isContextOverflow(err: GatewayError): boolean {
  if (err.source !== "client" || err.upstreamKind === undefined) return false;
  const refusal = REFUSALS[err.upstreamKind];
  if (refusal.code !== undefined && err.upstreamCode === refusal.code) return true;
  // A server that copies a provider's wording may leave out or misname its type.
  const typed = err.upstreamType === undefined || refusal.type === undefined ||
    err.upstreamType === refusal.type;
  return typed && refusal.message.test(err.message);
}
