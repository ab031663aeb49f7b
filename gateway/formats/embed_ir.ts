import type { IrRequest } from "./ir.ts";
import type { EmbedRequest } from "./embeddings.ts";

/**
 * What the request path keeps of an embeddings request in the generation's terms: its route,
 * no stream, its session hint, and its texts as one user turn, so what is estimated of a
 * request (a lost hedge's input) is estimated from them. No upstream is sent this.
 */
export function embedIr(embed: EmbedRequest): IrRequest {
  const content = embed.inputs.flatMap((input) =>
    input.text === undefined ? [] : [{ type: "text" as const, text: input.text }]
  );
  return {
    model: embed.model,
    messages: content.length ? [{ role: "user", content }] : [],
    stream: false,
    ...(embed.user === undefined ? {} : { sessionHint: embed.user }),
  };
}
