import type { IrPart, IrRequest } from "./ir.ts";

/**
 * Characters per token: the rule of thumb Anthropic, Google and OpenAI all give for English.
 * The gateway's one estimator (docs/observability.md "Token usage"): counts it cannot ask
 * an upstream for, and tokens a hop billed but never reported, are all made from it.
 */
const CHARS_PER_TOKEN = 4;

/** Tokens in `text`: characters / 4, rounded up. */
export function estimateTokens(text: string | number): number {
  const chars = typeof text === "number" ? text : text.length;
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

/** An image is not decoded to be measured; this is a typical picture's cost at Anthropic and OpenAI. */
const TOKENS_PER_IMAGE = 1_000;

/**
 * A rough input token count, for a route whose upstream has no counter or
 * whose counter failed: characters / 4, rounded up, over the system prompt,
 * every message's text (tool calls by name and arguments, tool results by
 * content) and the tools' names, descriptions and schemas, plus a flat
 * allowance per image. Content only the client's own format carries is not
 * in the IR and not counted.
 */
export function estimateInputTokens(ir: IrRequest): number {
  let chars = ir.system?.length ?? 0;
  let images = 0;
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let i = 0; i < ir.messages.length; i++) {
    const content = ir.messages[i]!.content;
    for (let j = 0; j < content.length; j++) {
      const p = content[j]!;
      if (p.type === "image" || p.type === "image_url") images++;
      else chars += partChars(p);
    }
  }
  for (const t of ir.tools ?? []) {
    chars += t.name.length + (t.description?.length ?? 0) + JSON.stringify(t.parameters).length;
  }
  return estimateTokens(chars) + images * TOKENS_PER_IMAGE;
}

/** Characters of text in `parts` (images not counted). */
export function partsChars(parts: readonly IrPart[]): number {
  let chars = 0;
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let i = 0; i < parts.length; i++) chars += partChars(parts[i]!);
  return chars;
}

function partChars(p: IrPart): number {
  switch (p.type) {
    case "text":
    case "reasoning":
    case "refusal":
      return p.text.length;
    case "tool_call":
      return p.name.length + p.arguments.length;
    case "tool_result":
      return p.content.length;
    default:
      return 0;
  }
}
