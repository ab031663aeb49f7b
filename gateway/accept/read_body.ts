import { clientError } from "../runtime/gateway_error.ts";
import type { Clock } from "../runtime/clock.ts";
import { readBodyBytes } from "./body_bytes.ts";

/** docs/design.md "Client API": the default limit on a request body. */
export const BODY_LIMIT_BYTES = 32 * 1024 * 1024;
/**
 * How deep a request body's arrays and objects may nest. Real requests (tool
 * schemas included) stay far below; a body of thousands of nested arrays
 * costs every later walk over it (translation, serialising per hop) dearly.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * Reads a JSON body with a size limit and a deadline (`readBodyBytes`, docs/security.md
 * "Request bodies and per-key concurrency"), then parses it.
 */
export async function readJsonBody(
  request: Request,
  opts: { limit?: number; signal: AbortSignal; clock?: Clock },
): Promise<unknown> {
  const limit = opts.limit ?? BODY_LIMIT_BYTES;
  const bytes = await readBodyBytes(request, { limit, signal: opts.signal, clock: opts.clock });
  return parse(UTF8.decode(bytes));
}

/** One decoder for every body: `decode` without `stream` keeps no state between calls. */
const UTF8 = new TextDecoder();

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
