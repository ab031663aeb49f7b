/**
 * Who speaks embeddings (docs/providers.md "Embeddings"): the client formats that ask for them
 * and the upstream kinds that answer them. A kind missing here has no embeddings API
 * (Anthropic, OpenAI Responses, Gemini Interactions): its candidates are passed over like
 * those that cannot express a request.
 */
import type { UpstreamKind } from "./format.ts";
import type { EmbedClient, EmbedRequest, EmbedTarget, EmbedUpstream } from "./embeddings.ts";
import { openAiEmbedClient, openAiEmbedUpstream } from "./openai_chat/embeddings.ts";
import {
  geminiBatchEmbedClient,
  geminiEmbedClient,
  geminiEmbedUpstream,
} from "./gemini/embeddings.ts";
import { bedrockEmbedUpstream } from "./bedrock/embeddings.ts";

export const EMBED_CLIENTS = {
  openai: openAiEmbedClient,
  gemini: geminiEmbedClient,
  geminiBatch: geminiBatchEmbedClient,
} satisfies Record<string, EmbedClient>;

export const EMBED_UPSTREAMS: Partial<Record<UpstreamKind, EmbedUpstream>> = {
  "openai-chat": openAiEmbedUpstream,
  gemini: geminiEmbedUpstream,
  bedrock: bedrockEmbedUpstream,
};

/**
 * What a candidate cannot do of an embeddings request, one description each; empty when it can.
 * Without a target, only whether its kind embeds at all.
 */
export function embedUnsupported(
  req: EmbedRequest,
  opts: { kind: UpstreamKind; target?: EmbedTarget },
): string[] {
  const upstream = EMBED_UPSTREAMS[opts.kind];
  if (!upstream) return [`embeddings (${opts.kind} has no embeddings API)`];
  return opts.target ? upstream.unsupported(req, opts.target) : [];
}
