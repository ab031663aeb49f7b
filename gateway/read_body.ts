import { clientError, GatewayError } from "./gateway_error.ts";
import { clientDisconnected } from "./stop_reasons.ts";

/** SPEC §4: the default limit on a request body. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/**
 * Reads a JSON body with a size limit, counting bytes as they come so an
 * oversized body is refused without being held. A caller who leaves while
 * sending is told apart from a bad body.
 */
export async function readJsonBody(
  request: Request,
  opts: { limit?: number; signal: AbortSignal },
): Promise<unknown> {
  const limit = opts.limit ?? BODY_LIMIT_BYTES;
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw tooLarge(limit);
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
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  const text = new TextDecoder().decode(bytes);
  if (text.trim() === "") {
    throw clientError("request body is empty; send a JSON object", {
      code: "gw.client.invalid_json",
    });
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw clientError(`request body is not valid JSON: ${(err as Error).message}`, {
      code: "gw.client.invalid_json",
    });
  }
}

function tooLarge(limit: number): GatewayError {
  return clientError(`request body is larger than the limit of ${limit} bytes`, {
    code: "gw.client.body_too_large",
    status: 413,
  });
}
