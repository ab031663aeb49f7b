/**
 * The wire formats by name: the kinds of upstream the gateway can call and the
 * formats clients speak to it. Named here, at the bottom of the tree, because
 * every layer's errors and records carry them (docs/architecture.md "Layout").
 */
export const UPSTREAM_KINDS = [
  "openai-chat",
  "openai-responses",
  "anthropic",
  "gemini",
  "bedrock",
  "gemini-interactions",
] as const;
export type UpstreamKind = (typeof UPSTREAM_KINDS)[number];

export type ClientFormat =
  | "openai-chat"
  | "openai-responses"
  | "anthropic"
  | "gemini"
  | "gemini-interactions";

/** Who a failure belongs to; the same words travel in `x-pulsegate-error`. */
export type FailureSource = "upstream" | "timeout" | "aborted" | "client" | "gateway" | "config";
