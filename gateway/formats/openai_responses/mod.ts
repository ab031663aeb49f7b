import { KEEP_ALIVE_BLOCK } from "../sse_stream.ts";
import { upstreamKey } from "../upstream_key.ts";
import { passthroughText, translatedText } from "../request_text.ts";
import { postRequest, upstreamPostInit } from "../../accept/client_headers.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { upstreamBaseUrl } from "../../config/schema.ts";
import { upstreamStatusError } from "../../forward/upstream_error.ts";
import { openAiError } from "../openai_chat/errors.ts";
import { parseResponsesRequest, responsesRequestBody, unsupportedFor } from "./request.ts";
import { decodeResponsesWhole, encodeResponsesWhole } from "./response.ts";
import { decodeResponsesStream, responsesFrameDecoder, responsesStreamEncoder } from "./stream.ts";

export const responsesClient: ClientCodec = {
  format: "openai-responses",
  parseRequest: (body) => parseResponsesRequest(body),
  encodeWhole: (res, ctx) => encodeResponsesWhole(res, ctx?.clientTools),
  streamShape: () => ({
    contentType: "text/event-stream; charset=utf-8",
    keepAlive: KEEP_ALIVE_BLOCK,
    passthroughFrom: "openai-responses",
    // `response.completed` is the finish itself: a stream without it did not finish.
    endMarker: null,
  }),
  streamEncoder: (ctx) =>
    responsesStreamEncoder({ id: ctx.id, model: ctx.model, clientTools: ctx.clientTools }),
  renderError: openAiError,
};

export const responsesUpstream: UpstreamAdapter = {
  kind: "openai-responses",
  unsupportedFor,
  buildRequest: (call) => responsesUpstream.buildPost!(call).then(postRequest),
  buildPost(call) {
    const body = call.passthrough
      ? passthroughText(call.passthrough, call.model)
      : translatedText(call, { build: () => responsesRequestBody(call.ir, call.model) });
    const headers = new Headers({ "content-type": "application/json" });
    const key = upstreamKey(call);
    if (key) headers.set("authorization", `Bearer ${key}`);
    const url = `${upstreamBaseUrl(call.upstream)}/responses`;
    return Promise.resolve(upstreamPostInit(url, { headers, body, forwarded: call.forwarded }));
  },
  decodeStream: decodeResponsesStream,
  frameDecoder: responsesFrameDecoder,
  decodeWhole: decodeResponsesWhole,
  decodeError: (status, body, opts) =>
    upstreamStatusError(status, { body, kind: "openai-responses", headers: opts?.headers }),
};
