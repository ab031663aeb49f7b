import { ownTurn, passthroughText, translatedText } from "../request_text.ts";
import { guardRequestJson } from "../json_guard.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { jsonPost, sseShape, statusErrors } from "../format_kit.ts";
import { postRequest } from "../client_headers.ts";
import { openAiAuth, openAiUrl } from "../cloud/azure.ts";
import { openAiError } from "../openai_chat/errors.ts";
import { parseResponsesRequest, responsesRequestBody, unsupportedFor } from "./request.ts";
import { decodeResponsesWhole, encodeResponsesWhole } from "./response.ts";
import { decodeResponsesStream, responsesFrameDecoder, responsesStreamEncoder } from "./stream.ts";

export const responsesClient: ClientCodec = {
  format: "openai-responses",
  parseRequest: (body) => guardRequestJson(parseResponsesRequest(body), body),
  encodeWhole: (res, ctx) => encodeResponsesWhole(res, ctx),
  // `response.completed` is the finish itself: a stream without it did not finish.
  streamShape: () => sseShape("openai-responses", { endMarker: null }),
  streamEncoder: (ctx) =>
    responsesStreamEncoder({
      id: ctx.id,
      model: ctx.model,
      clientTools: ctx.clientTools,
      now: ctx.now,
    }),
  renderError: openAiError,
};

export const responsesUpstream: UpstreamAdapter = {
  kind: "openai-responses",
  unsupportedFor,
  buildRequest: (call) => responsesUpstream.buildPost!(call).then(postRequest),
  async buildPost(call) {
    const body = await ownTurn(
      call,
      () =>
        call.passthrough
          ? passthroughText(call.passthrough, call.model)
          : translatedText(call, { build: () => responsesRequestBody(call.ir, call.model) }),
    );
    const url = openAiUrl(call.upstream, { path: "responses", model: call.model });
    return jsonPost(call, { url, body, auth: openAiAuth(call.upstream) });
  },
  decodeStream: decodeResponsesStream,
  frameDecoder: responsesFrameDecoder,
  decodeWhole: decodeResponsesWhole,
  decodeError: statusErrors("openai-responses"),
};
