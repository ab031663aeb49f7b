import { ownTurn, passthroughText, translatedText } from "../request_text.ts";
import { guardRequestJson } from "../json_guard.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { jsonPost, sseShape, statusErrors } from "../format_kit.ts";
import { postRequest } from "../client_headers.ts";
import { openAiAuth, openAiUrl } from "../cloud/azure.ts";
import { openAiError } from "./errors.ts";
import { chatRequestBody, maxTokensField, parseChatRequest, unsupportedFor } from "./request.ts";
import { decodeChatWhole, encodeChatWhole } from "./response.ts";
import { chatFrameDecoder, chatStreamEncoder, decodeChatStream } from "./stream.ts";
import { askingUsage } from "./usage_options.ts";

/** Sent after a passed-through stream that finished without it. */
const END_MARKER = new TextEncoder().encode("data: [DONE]\n\n");

export const chatClient: ClientCodec = {
  format: "openai-chat",
  parseRequest: (body) => guardRequestJson(parseChatRequest(body), body),
  encodeWhole: encodeChatWhole,
  streamShape: () => sseShape("openai-chat", { endMarker: END_MARKER }),
  streamEncoder: (ctx) => chatStreamEncoder({ id: ctx.id, model: ctx.model, now: ctx.now }),
  renderError: openAiError,
};

export const chatUpstream: UpstreamAdapter = {
  kind: "openai-chat",
  unsupportedFor,
  buildRequest: (call) => chatUpstream.buildPost!(call).then(postRequest),
  async buildPost(call) {
    const tokenField = maxTokensField(call.upstream, call.model);
    const body = await ownTurn(
      call,
      () =>
        call.passthrough
          ? passthroughText(askingUsage(call.passthrough), call.model)
          : translatedText(call, {
            variant: tokenField,
            build: () => chatRequestBody(call.ir, call.model, { tokenField }),
          }),
    );
    const url = openAiUrl(call.upstream, { path: "chat/completions", model: call.model });
    return jsonPost(call, { url, body, auth: openAiAuth(call.upstream) });
  },
  decodeStream: decodeChatStream,
  frameDecoder: chatFrameDecoder,
  decodeWhole: decodeChatWhole,
  decodeError: statusErrors("openai-chat"),
};
