import { ownTurn, passthroughText, translatedText } from "../request_text.ts";
import { guardRequestJson } from "../json_guard.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { jsonPost, statusErrors } from "../format_kit.ts";
import { postRequest } from "../client_headers.ts";
import { upstreamBaseUrl } from "../../config/schema.ts";
import { geminiError } from "./errors.ts";
import { vertexModelUrl, vertexOf } from "../cloud/vertex.ts";
import { vertexAuthorization } from "../cloud/vertex_auth.ts";
import {
  geminiModelPath,
  geminiRequestBody,
  parseGeminiRequest,
  unsupportedFor,
} from "./request.ts";
import { decodeGeminiWhole, encodeGeminiWhole } from "./response.ts";
import { decodeGeminiStream, geminiFrameDecoder, geminiStreamEncoder } from "./stream.ts";

export const geminiClient: ClientCodec = {
  format: "gemini",
  parseRequest: (body, ctx) => guardRequestJson(parseGeminiRequest(body, ctx), body),
  encodeWhole: encodeGeminiWhole,
  // Google's SDK parses every SSE line as JSON, comments included: no keep-alives.
  // Only the SSE form can take an upstream's SSE bytes; the JSON array is re-encoded.
  streamShape: (ctx) => ({
    contentType: ctx.sse ? "text/event-stream" : "application/json",
    keepAlive: null,
    passthroughFrom: ctx.sse ? "gemini" : null,
    endMarker: null,
  }),
  streamEncoder: geminiStreamEncoder,
  renderError: geminiError,
};

const apiKeyHeader = (key: string): [string, string] => ["x-goog-api-key", key];

export const geminiUpstream: UpstreamAdapter = {
  kind: "gemini",
  unsupportedFor,
  buildRequest: (call) => geminiUpstream.buildPost!(call).then(postRequest),
  async buildPost(call) {
    // The model lives in the URL, so a pass-through body goes on untouched.
    const body = await ownTurn(
      call,
      () =>
        call.passthrough
          ? passthroughText(call.passthrough)
          : translatedText(call, { build: () => geminiRequestBody(call.ir) }),
    );
    const method = call.ir.stream ? "streamGenerateContent?alt=sse" : "generateContent";
    const vertex = vertexOf(call.upstream);
    if (vertex) {
      // Vertex AI: the same body and stream, at the model's URL in the project, with OAuth.
      const url = vertexModelUrl(call.upstream, {
        vertex,
        publisher: "google",
        model: call.model,
        method,
      });
      const authorization = await vertexAuthorization(call, vertex);
      return jsonPost(call, { url, body, auth: apiKeyHeader, headers: { authorization } });
    }
    const url = `${upstreamBaseUrl(call.upstream)}/v1beta/${geminiModelPath(call.model)}:${method}`;
    return jsonPost(call, { url, body, auth: apiKeyHeader });
  },
  decodeStream: decodeGeminiStream,
  frameDecoder: geminiFrameDecoder,
  decodeWhole: decodeGeminiWhole,
  decodeError: statusErrors("gemini"),
};
