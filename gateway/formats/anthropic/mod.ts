import { KEEP_ALIVE_BLOCK } from "../sse_stream.ts";
import { upstreamKey } from "../upstream_key.ts";
import { passthroughText, translatedText } from "../request_text.ts";
import { postRequest, upstreamPostInit } from "../../accept/client_headers.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { upstreamBaseUrl } from "../../config/schema.ts";
import { upstreamStatusError } from "../../forward/upstream_error.ts";
import { anthropicError } from "./errors.ts";
import { anthropicRequestBody, parseAnthropicRequest, unsupportedFor } from "./request.ts";
import { decodeAnthropicWhole, encodeAnthropicWhole } from "./response.ts";
import { anthropicFrameDecoder, anthropicStreamEncoder, decodeAnthropicStream } from "./stream.ts";

/** The API version every Anthropic SDK sends; the wire format in this folder is that version's. */
/** Sent after a passed-through stream that finished without it. */
const END_MARKER = new TextEncoder().encode(
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
);

export const ANTHROPIC_VERSION = "2023-06-01";

export const anthropicClient: ClientCodec = {
  format: "anthropic",
  parseRequest: (body) => parseAnthropicRequest(body),
  encodeWhole: encodeAnthropicWhole,
  streamShape: () => ({
    contentType: "text/event-stream; charset=utf-8",
    keepAlive: KEEP_ALIVE_BLOCK,
    passthroughFrom: "anthropic",
    endMarker: END_MARKER,
  }),
  streamEncoder: (ctx) => anthropicStreamEncoder({ id: ctx.id, model: ctx.model }),
  renderError: anthropicError,
};

export const anthropicUpstream: UpstreamAdapter = {
  kind: "anthropic",
  unsupportedFor,
  buildRequest: (call) => anthropicUpstream.buildPost!(call).then(postRequest),
  buildPost(call) {
    const body = call.passthrough
      ? passthroughText(call.passthrough, call.model)
      : translatedText(call, { build: () => anthropicRequestBody(call.ir, call.model) });
    const headers = new Headers({
      "content-type": "application/json",
      "anthropic-version": ANTHROPIC_VERSION,
    });
    const key = upstreamKey(call);
    if (key) headers.set("x-api-key", key);
    const url = `${upstreamBaseUrl(call.upstream)}/v1/messages`;
    return Promise.resolve(upstreamPostInit(url, { headers, body, forwarded: call.forwarded }));
  },
  decodeStream: decodeAnthropicStream,
  frameDecoder: anthropicFrameDecoder,
  decodeWhole: decodeAnthropicWhole,
  decodeError: (status, body, opts) =>
    upstreamStatusError(status, { body, kind: "anthropic", headers: opts?.headers }),
};
