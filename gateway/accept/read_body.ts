import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import { clientDisconnected } from "../forward/stop_reasons.ts";
import { concatBytes } from "../runtime/join_bytes.ts";
import { parseRequestBody } from "../formats/json_guard.ts";

/** docs/design.md "Client API": the default limit on a request body. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/**
 * Reads a JSON body with a size limit: a declared length over it is refused
 * before reading, a chunked body is counted as it comes. A caller who leaves
 * while sending is told apart from a bad body.
 */
export async function readJsonBody(
  request: Request,
  opts: { limit?: number; signal: AbortSignal },
): Promise<unknown> {
  const limit = opts.limit ?? BODY_LIMIT_BYTES;
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
  const bytes = declared > 0
    ? await wholeBody(request, opts.signal)
    : await countedBody(request, { limit, signal: opts.signal });
  // A body longer than its Content-Length is cut by the HTTP layer; shorter ones fail above.
  if (bytes.byteLength > limit) throw tooLarge(limit);
  return parseRequestBody(bytes);
}

/** With a declared length (already checked), the runtime's own reader is the cheap path. */
async function wholeBody(request: Request, signal: AbortSignal): Promise<Uint8Array> {
  try {
    return new Uint8Array(await request.arrayBuffer());
  } catch {
    throw signal.aborted ? signal.reason : clientDisconnected();
  }
}

/** Without a length (chunked), bytes are counted as they come so a huge body is cut early. */
async function countedBody(
  request: Request,
  opts: { limit: number; signal: AbortSignal },
): Promise<Uint8Array> {
  const { limit } = opts;
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of request.body ?? new ReadableStream()) {
      size += chunk.byteLength;
      if (size > limit) throw tooLarge(limit);
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    throw opts.signal.aborted ? opts.signal.reason : clientDisconnected();
  }
  return concatBytes(chunks);
}

function tooLarge(limit: number): GatewayError {
  return clientError(`request body is larger than the limit of ${limit} bytes`, {
    code: "gw.client.body_too_large",
  });
}
