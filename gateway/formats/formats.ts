import type { ClientCodec, UpstreamAdapter, UpstreamKind } from "./format.ts";
import { anthropicClient, anthropicUpstream } from "./anthropic/mod.ts";
import { bedrockUpstream } from "./bedrock/mod.ts";
import { geminiClient, geminiUpstream } from "./gemini/mod.ts";
import { interactionsClient, interactionsUpstream } from "./gemini_interactions/mod.ts";
import { chatClient, chatUpstream } from "./openai_chat/mod.ts";
import { responsesClient, responsesUpstream } from "./openai_responses/mod.ts";

export const UPSTREAM_ADAPTERS: Record<UpstreamKind, UpstreamAdapter> = {
  "openai-chat": chatUpstream,
  "openai-responses": responsesUpstream,
  "anthropic": anthropicUpstream,
  "gemini": geminiUpstream,
  "bedrock": bedrockUpstream,
  "gemini-interactions": interactionsUpstream,
};

export const CLIENT_CODECS = {
  chat: chatClient,
  responses: responsesClient,
  anthropic: anthropicClient,
  gemini: geminiClient,
  interactions: interactionsClient,
} satisfies Record<string, ClientCodec>;
