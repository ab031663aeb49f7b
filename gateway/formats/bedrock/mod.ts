import { upstreamBaseUrl } from "../../config/schema.ts";
import type { UpstreamAdapter, UpstreamCall } from "../format.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";
import { decodeBedrockError } from "./errors.ts";
import { converseRequestBody, converseUrl, unsupportedFor } from "./request.ts";
import { decodeBedrockWhole } from "./response.ts";
import { bedrockCredentials, signedPost } from "./sign.ts";
import { decodeBedrockStream } from "./stream.ts";
import { ownTurn, translatedText } from "../request_text.ts";
import { applyUpstreamHeaders } from "../upstream_headers.ts";

/**
 * Converse / ConverseStream, SigV4-signed. There is no Bedrock client format,
 * so `call.passthrough` never arrives here and every body is translated.
 */
export const bedrockUpstream: UpstreamAdapter = {
  kind: "bedrock",
  unsupportedFor,
  buildRequest: buildBedrockRequest,
  decodeStream: decodeBedrockStream,
  decodeWhole: decodeBedrockWhole,
  decodeError: (status, body, opts) =>
    decodeBedrockError(status, body, { errorType: opts?.headers?.get("x-amzn-errortype") }),
};

// Async so that a refusal or a missing key arrives as a rejection, like a failed fetch.
async function buildBedrockRequest(call: UpstreamCall): Promise<Request> {
  const { upstream } = call;
  if (upstream.kind !== "bedrock") {
    throw new GatewayError(`upstream ${upstream.id} is not a bedrock upstream`, {
      code: "gw.gateway.internal",
    });
  }
  // The body first: a request Bedrock cannot express is the caller's answer, whatever the keys.
  const body = await ownTurn(
    call,
    () => translatedText(call, { build: () => converseRequestBody(call.ir, call.model) }),
  );
  const url = converseUrl(upstreamBaseUrl(upstream), { model: call.model, stream: call.ir.stream });
  const request = await signedPost(url, {
    body,
    credentials: bedrockCredentials(upstream, call.env),
  });
  // Not signed, which SigV4 allows: the operator's extra headers (never an x-amz-* one).
  applyUpstreamHeaders(request.headers, call);
  return request;
}
