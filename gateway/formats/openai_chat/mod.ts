import { KEEP_ALIVE_BLOCK } from "../sse_stream.ts";
import { upstreamKey } from "../upstream_key.ts";
import { passthroughText, translatedText } from "../request_text.ts";
import { postRequest, upstreamPostInit } from "../../accept/client_headers.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { upstreamBaseUrl } from "../../config/schema.ts";
import { upstreamStatusError } from "../../forward/upstream_error.ts";
import { openAiError } from "./errors.ts";
import { chatRequestBody, maxTokensField, parseChatRequest, unsupportedFor } from "./request.ts";
import { decodeChatWhole, encodeChatWhole } from "./response.ts";
import { chatFrameDecoder, chatStreamEncoder, decodeChatStream } from "./stream.ts";

/** Sent after a passed-through stream that finished without it. */
const END_MARKER = new TextEncoder().encode("data: [DONE]\n\n");

export const chatClient: ClientCodec = {
  format: "openai-chat",
  parseRequest: (body) => parseChatRequest(body),
  encodeWhole: encodeChatWhole,
  streamShape: () => ({
    contentType: "text/event-stream; charset=utf-8",
    keepAlive: KEEP_ALIVE_BLOCK,
    passthroughFrom: "openai-chat",
    endMarker: END_MARKER,
  }),
  streamEncoder: (ctx) => chatStreamEncoder({ id: ctx.id, model: ctx.model }),
  renderError: openAiError,
};

export const chatUpstream: UpstreamAdapter = {
  kind: "openai-chat",
  unsupportedFor,
  buildRequest: (call) => chatUpstream.buildPost!(call).then(postRequest),
  buildPost(call) {
    const tokenField = maxTokensField(call.upstream, call.model);
    const body = call.passthrough
      ? passthroughText(call.passthrough, call.model)
      : translatedText(call, {
        variant: tokenField,
        build: () => chatRequestBody(call.ir, call.model, { tokenField }),
      });
    const headers = new Headers({ "content-type": "application/json" });
    const key = upstreamKey(call);
    if (key) headers.set("authorization", `Bearer ${key}`);
    const url = `${upstreamBaseUrl(call.upstream)}/chat/completions`;
    return Promise.resolve(upstreamPostInit(url, { headers, body, forwarded: call.forwarded }));
  },
  decodeStream: decodeChatStream,
  frameDecoder: chatFrameDecoder,
  decodeWhole: decodeChatWhole,
  decodeError: (status, body, opts) =>
    upstreamStatusError(status, { body, kind: "openai-chat", headers: opts?.headers }),
};
