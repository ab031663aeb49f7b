import { ownTurn, passthroughText, translatedText } from "../request_text.ts";
import { guardRequestJson } from "../json_guard.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { jsonPost, sseShape, statusErrors } from "../format_kit.ts";
import { postRequest } from "../client_headers.ts";
import { upstreamBaseUrl } from "../../config/schema.ts";
import { anthropicError } from "./errors.ts";
import { anthropicRequestBody, parseAnthropicRequest, unsupportedFor } from "./request.ts";
import { decodeAnthropicWhole, encodeAnthropicWhole } from "./response.ts";
import { anthropicFrameDecoder, anthropicStreamEncoder, decodeAnthropicStream } from "./stream.ts";

/** Sent after a passed-through stream that finished without it. */
const END_MARKER = new TextEncoder().encode(
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
);

/** The API version every Anthropic SDK sends; the wire format in this folder is that version's. */
export const ANTHROPIC_VERSION = "2023-06-01";

export const anthropicClient: ClientCodec = {
  format: "anthropic",
  parseRequest: (body) => guardRequestJson(parseAnthropicRequest(body), body),
  encodeWhole: encodeAnthropicWhole,
  streamShape: () => sseShape("anthropic", { endMarker: END_MARKER }),
  streamEncoder: (ctx) => anthropicStreamEncoder({ id: ctx.id, model: ctx.model }),
  renderError: anthropicError,
};

export const anthropicUpstream: UpstreamAdapter = {
  kind: "anthropic",
  unsupportedFor,
  buildRequest: (call) => anthropicUpstream.buildPost!(call).then(postRequest),
  async buildPost(call) {
    const body = await ownTurn(
      call,
      () =>
        call.passthrough
          ? passthroughText(call.passthrough, call.model)
          : translatedText(call, { build: () => anthropicRequestBody(call.ir, call.model) }),
    );
    return jsonPost(call, {
      url: `${upstreamBaseUrl(call.upstream)}/v1/messages`,
      body,
      auth: (key) => ["x-api-key", key],
      headers: { "anthropic-version": ANTHROPIC_VERSION },
    });
  },
  decodeStream: decodeAnthropicStream,
  frameDecoder: anthropicFrameDecoder,
  decodeWhole: decodeAnthropicWhole,
  decodeError: statusErrors("anthropic"),
};
