import { ownTurn, passthroughText, translatedText } from "../request_text.ts";
import { guardRequestJson } from "../json_guard.ts";
import type { ClientCodec, UpstreamAdapter } from "../format.ts";
import { jsonPost, sseShape, statusErrors } from "../format_kit.ts";
import { postRequest } from "../client_headers.ts";
import { interactionsError } from "./errors.ts";
import { interactionsRequestBody, parseInteractionsRequest, unsupportedFor } from "./request.ts";
import { decodeInteractionsWhole, encodeInteractionsWhole } from "./response.ts";
import {
  decodeInteractionsStream,
  DONE_BLOCK,
  interactionsFrameDecoder,
  interactionsStreamEncoder,
} from "./stream.ts";
import { interactionsUrl, withGoogleKey } from "./paths.ts";

/** Google's Interactions API (`POST /v1beta/interactions`), as clients speak it to the gateway. */
export const interactionsClient: ClientCodec = {
  format: "gemini-interactions",
  parseRequest: (body) => guardRequestJson(parseInteractionsRequest(body), body),
  encodeWhole: encodeInteractionsWhole,
  // The SDK's SSE reader skips comment lines, so keep-alives may flow; `[DONE]` ends the stream.
  streamShape: () => sseShape("gemini-interactions", { endMarker: DONE_BLOCK }),
  streamEncoder: interactionsStreamEncoder,
  renderError: interactionsError,
};

/** The Interactions API as an upstream: the model goes in the body, the key in `x-goog-api-key`. */
export const interactionsUpstream: UpstreamAdapter = {
  kind: "gemini-interactions",
  unsupportedFor,
  buildRequest: (call) => interactionsUpstream.buildPost!(call).then(postRequest),
  async buildPost(call) {
    const body = await ownTurn(
      call,
      () =>
        call.passthrough
          ? passthroughText(call.passthrough, call.model)
          : translatedText(call, { build: () => interactionsRequestBody(call.ir, call.model) }),
    );
    const accept = call.ir.stream ? "text/event-stream" : "application/json";
    return jsonPost(call, {
      url: interactionsUrl(call.upstream),
      body,
      auth: withGoogleKey,
      headers: { accept },
    });
  },
  decodeStream: decodeInteractionsStream,
  frameDecoder: interactionsFrameDecoder,
  decodeWhole: decodeInteractionsWhole,
  decodeError: statusErrors("gemini-interactions"),
};
