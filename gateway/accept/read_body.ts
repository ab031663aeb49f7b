import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import { clientDisconnected } from "../forward/stop_reasons.ts";
import { concatBytes } from "../runtime/join_bytes.ts";

/** docs/design.md "Client API": the default limit on a request body. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;
/**
 * How deep a request body's arrays and objects may nest. Real requests (tool
 * schemas included) stay far below; a body of thousands of nested arrays
 * costs every later walk over it (translation, serialising per hop) dearly.
 */
export const MAX_JSON_DEPTH = 128;

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
  return parse(UTF8.decode(bytes));
}

/** One decoder for every body: `decode` without `stream` keeps no state between calls. */
const UTF8 = new TextDecoder();

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

function parse(text: string): unknown {
  if (text.trim() === "") {
    throw clientError("request body is empty; send a JSON object", {
      code: "gw.client.invalid_json",
    });
  }
  const depth = nestingOver(text, MAX_JSON_DEPTH);
  if (depth) {
    throw clientError(
      `request body nests deeper than ${MAX_JSON_DEPTH} levels (at byte ${depth})`,
      { code: "gw.client.invalid_json" },
    );
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw clientError(`request body is not valid JSON: ${(err as Error).message}`, {
      code: "gw.client.invalid_json",
    });
  }
}

/**
 * Where the text first nests deeper than `max` (brackets outside strings),
 * or 0: one pass over the text, before any parsing. Strings, most of a
 * request's bytes, are skipped by `indexOf` rather than read a character at
 * a time.
 */
function nestingOver(text: string, max: number): number {
  // Nesting deeper than `max` takes more than `max` characters.
  if (text.length <= max) return 0;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      i = stringEnd(text, i);
      if (i < 0) return 0; // unterminated: JSON.parse says so
    } else if (c === 91 || c === 123) {
      if (++depth > max) return i;
    } else if (c === 93 || c === 125) depth--;
  }
  return 0;
}

/** The index of the quote closing the string opened at `open`, or -1. */
function stringEnd(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  while (at > 0) {
    // A quote after an odd run of backslashes is escaped.
    let before = at - 1;
    while (text.charCodeAt(before) === 92) before--;
    if ((at - 1 - before) % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
  return -1;
}

function tooLarge(limit: number): GatewayError {
  return clientError(`request body is larger than the limit of ${limit} bytes`, {
    code: "gw.client.body_too_large",
  });
}
