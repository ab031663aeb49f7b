import { ownTurn, passthroughText, reshapedText, translatedText } from "../request_text.ts";
import { guardRequestJson } from "../json_guard.ts";
import type { ClientCodec, UpstreamAdapter, UpstreamCall } from "../format.ts";
import { jsonPost, sseShape, statusErrors } from "../format_kit.ts";
import { postRequest, type UpstreamPost } from "../client_headers.ts";
import type { VertexOptions } from "../../config/cloud_schema.ts";
import { vertexClaudeBody, vertexModelUrl, vertexOf } from "../cloud/vertex.ts";
import { vertexAuthorization } from "../cloud/vertex_auth.ts";
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
    const vertex = vertexOf(call.upstream);
    if (vertex) return await vertexClaudePost(call, vertex);
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

/**
 * Claude on Vertex AI: the Messages body with `anthropic_version` in it and no `model`, at the
 * model's `:rawPredict` / `:streamRawPredict`, with OAuth. The client's query flags are left
 * behind: Google's front end refuses a query parameter it does not know (`?beta=true`).
 */
async function vertexClaudePost(call: UpstreamCall, vertex: VertexOptions): Promise<UpstreamPost> {
  const body = await ownTurn(
    call,
    () =>
      call.passthrough
        ? reshapedText(call.passthrough, { key: "vertex", reshape: vertexClaudeBody })
        : translatedText(call, {
          variant: "vertex",
          build: () => vertexClaudeBody(anthropicRequestBody(call.ir, call.model)),
        }),
  );
  const method = call.ir.stream ? "streamRawPredict" : "rawPredict";
  const url = vertexModelUrl(call.upstream, {
    vertex,
    publisher: "anthropic",
    model: call.model,
    method,
  });
  const authorization = await vertexAuthorization(call, vertex);
  const forwarded = call.forwarded && { headers: call.forwarded.headers, query: [] };
  return jsonPost({ ...call, forwarded }, {
    url,
    body,
    auth: (key) => ["x-api-key", key],
    headers: { authorization },
  });
}
