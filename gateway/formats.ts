import type { ClientCodec, UpstreamAdapter, UpstreamKind } from "./format.ts";
import { clientError } from "./gateway_error.ts";
import { chatClient, chatUpstream } from "./openai_chat/mod.ts";
import { responsesClient, responsesUpstream } from "./openai_responses/mod.ts";

/** Stands in for a kind whose module is not wired yet, refusing clearly instead of failing late. */
function notYet(kind: UpstreamKind): UpstreamAdapter {
  const refuse = () => {
    throw clientError(`upstream kind ${kind} is not supported by this build`, {
      code: "gw.client.unsupported",
    });
  };
  return {
    kind,
    buildRequest: refuse,
    decodeStream: refuse,
    decodeWhole: refuse,
    decodeError: refuse,
  };
}

export const UPSTREAM_ADAPTERS: Record<UpstreamKind, UpstreamAdapter> = {
  "openai-chat": chatUpstream,
  "openai-responses": responsesUpstream,
  "anthropic": notYet("anthropic"),
  "gemini": notYet("gemini"),
  "bedrock": notYet("bedrock"),
};

export const CLIENT_CODECS = {
  chat: chatClient,
  responses: responsesClient,
} satisfies Record<string, ClientCodec>;
