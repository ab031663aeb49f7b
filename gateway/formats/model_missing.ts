import type { UpstreamKind } from "./format.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";

/**
 * How each provider says the model it was sent is not there (docs/design.md "Cooldown"): the
 * model was the operator's choice (the gateway sends each candidate's configured model, never
 * the caller's), so the refusal is the member's fault, not the caller's request's and not the
 * upstream's other models'. Read by the provider's own code, or its type and its own wording,
 * and where the words name the model, only when they name the one the gateway sent (real
 * bodies: tests/fixtures/model_missing/). Never by a status alone: a 404 is the caller's when it
 * names something the caller chose (a stored response, a tool's model), and a wrong base URL
 * answers 404 for every model alike.
 */
interface Missing {
  /** The provider's code that says it alone (OpenAI `code`, Azure's `DeploymentNotFound`). */
  code?: string;
  /** The provider's error type it comes under (undefined: any). */
  type?: string;
  message?: RegExp;
  /** The message must name the model the gateway sent (else it may be another the caller chose). */
  named?: true;
}

const OPENAI: readonly Missing[] = [
  // "The requested model 'x' does not exist." (param "model"); a built-in tool's model the
  // caller chose is refused in the same words, so the sent model must be the one named.
  { code: "model_not_found", named: true },
  // Azure OpenAI: the deployment in the path is the member's model; the caller cannot name one.
  { code: "DeploymentNotFound" },
  // "The model `x` does not exist or you do not have access to it." (OpenAI, Groq), "The model
  // `x` does not exist." (vLLM, whose numeric code is no code here).
  { message: /^The model `[^`]+` does not exist\b/, named: true },
];

const GEMINI: readonly Missing[] = [
  // "models/gemini-2.0-pro is not found for API version v1beta, or is not supported for ..."
  { type: "NOT_FOUND", message: /^models\/\S+ is not found for API version\b/, named: true },
];

const MISSING: Readonly<Record<UpstreamKind, readonly Missing[]>> = {
  "openai-chat": OPENAI,
  "openai-responses": OPENAI,
  // "model: claude-sonnet-4-20250514": the field at fault, then the value it was sent.
  "anthropic": [{ type: "not_found_error", message: /^model: \S+$/, named: true }],
  "gemini": GEMINI,
  "gemini-interactions": GEMINI,
  // The model is in the path, where the caller cannot put one.
  "bedrock": [{
    type: "ValidationException",
    message: /^The provided model identifier is invalid/,
  }],
};

/**
 * Whether an upstream's refusal passed on as the caller's (an upstream 4xx) says that `model`,
 * the model the gateway sent it, is not there. Our own errors and the upstream's failures (5xx,
 * 429) never are. Without a model, whichever model the words name will do: for an error already
 * judged so, read again at the route's end to give the caller the provider's own answer.
 */
export function isModelMissing(err: GatewayError, model?: string): boolean {
  if (err.source !== "client" || err.upstreamKind === undefined) return false;
  return MISSING[err.upstreamKind].some((m) =>
    (m.code === undefined || err.upstreamCode === m.code) &&
    (m.type === undefined || err.upstreamType === m.type) &&
    (m.message === undefined || m.message.test(err.message)) &&
    (!m.named || model === undefined || names(err.message, model))
  );
}

/**
 * Whether `message` names `model` as a whole: quoted, after "models/" or a space, and ended by a
 * quote, a space, a full stop or the end ("gpt-4" is not named by "`gpt-4o` does not exist").
 */
function names(message: string, model: string): boolean {
  const escaped = model.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(?:^|[\\s\`'"/])${escaped}(?=$|[\\s\`'"]|\\.(?:$|\\s))`).test(message);
}
