import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import type { IrPart, IrRequest } from "./ir.ts";
import { isRecord } from "../runtime/json.ts";
import { echoed } from "./bounded_names.ts";
import { nextTurn, OWN_TURN_BYTES } from "../runtime/loop_turn.ts";

/**
 * The one guard every JSON text a client sends goes through before the
 * gateway parses it: the request body, and the JSON texts inside it that a
 * translation parses again (tool-call arguments, tool results). Parsing,
 * walking and serialising JSON costs time on the serving thread per level
 * and per value, so both are bounded before anything is parsed
 * (docs/security.md "Deep JSON").
 */

/**
 * How deep a JSON text's arrays and objects may nest. Real requests (tool
 * schemas included) stay far below; a body of thousands of nested arrays
 * costs every later walk over it (translation, serialising per hop) dearly.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * How many values (object keys included) one request may hold, its body and
 * the JSON texts inside it together. Each value costs a model at least one
 * token, so no context window takes a request near this; a body of millions
 * of tiny values costs the serving thread seconds to parse and walk.
 */
export const MAX_JSON_VALUES = 1_000_000;

/** Where a text first went over a limit. */
interface Over {
  limit: "depth" | "values";
  /** The character index where it did. */
  at: number;
}

/**
 * One pass over a JSON text, before any parsing: how many values it holds
 * (counted as the commas, colons and opening brackets outside strings, plus
 * one: about one per value or key) and where it first nests deeper than
 * `depth` or holds more than `values`. Strings, most of a request's
 * characters, are skipped by `indexOf` rather than read a character at a
 * time; the scan stops at the first limit passed, so its own cost is bounded
 * too. It does not check the text is JSON: `JSON.parse` does that after it.
 */
export function jsonShape(
  text: string,
  limits: { depth: number; values: number },
): { values: number; over: Over | null } {
  let depth = 0;
  let values = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      i = stringEnd(text, i);
      if (i < 0) break; // unterminated: JSON.parse says so
    } else if (c === 91 || c === 123) {
      if (++depth > limits.depth) return { values, over: { limit: "depth", at: i } };
      if (++values > limits.values) return { values, over: { limit: "values", at: i } };
    } else if (c === 93 || c === 125) depth--;
    else if (c === 44 || c === 58) {
      if (++values > limits.values) return { values, over: { limit: "values", at: i } };
    }
  }
  return { values, over: null };
}

/**
 * `jsonShape` over a body's UTF-8 bytes, before they are decoded: the bytes a
 * scan looks at (quotes, backslashes, brackets, commas, colons) are ASCII,
 * and UTF-8 never uses an ASCII byte inside a longer character, so the shape
 * is the decoded text's. A body over a limit is refused without decoding it.
 */
export function jsonShapeOfBytes(
  bytes: Uint8Array,
  limits: { depth: number; values: number },
): { values: number; over: Over | null } {
  let depth = 0;
  let values = 1;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === 34) {
      i = bytesStringEnd(bytes, i);
      if (i < 0) break; // unterminated: JSON.parse says so
    } else if (c === 91 || c === 123) {
      if (++depth > limits.depth) return { values, over: { limit: "depth", at: i } };
      if (++values > limits.values) return { values, over: { limit: "values", at: i } };
    } else if (c === 93 || c === 125) depth--;
    else if (c === 44 || c === 58) {
      if (++values > limits.values) return { values, over: { limit: "values", at: i } };
    }
  }
  return { values, over: null };
}

function bytesStringEnd(bytes: Uint8Array, open: number): number {
  let at = bytes.indexOf(34, open + 1);
  while (at > 0) {
    let before = at - 1;
    while (bytes[before] === 92) before--;
    if ((at - 1 - before) % 2 === 0) return at;
    at = bytes.indexOf(34, at + 1);
  }
  return -1;
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

function invalidJson(message: string, param?: string): GatewayError {
  return clientError(message, { code: "gw.client.invalid_json", param });
}

/** The refusal for a text over a limit; `what` names the text ("request body"). */
function overLimit(
  what: string,
  opts: { over: Over; param?: string; unit?: "byte" | "character" },
): GatewayError {
  const { over } = opts;
  const why = over.limit === "depth"
    ? `nests deeper than ${MAX_JSON_DEPTH} levels`
    : `holds more than ${MAX_JSON_VALUES} JSON values in all (the request's body and the ` +
      `tool-call arguments and tool results inside it together)`;
  return invalidJson(`${what} ${why} (at ${opts.unit ?? "character"} ${over.at})`, opts.param);
}

/** Values of each parsed request body, so the texts inside it share its allowance. */
const bodyValues = new WeakMap<object, number>();
/** Bytes of each parsed request body, and of the request read from it. */
const clientSizes = new WeakMap<object, number>();

/** How many bytes the client sent for a body or the request read from it; 0 when not known. */
export function clientBytes(source: object | undefined): number {
  return source === undefined ? 0 : clientSizes.get(source) ?? 0;
}

/** One decoder for every body: `decode` without `stream` keeps no state between calls. */
const UTF8 = new TextDecoder();

/**
 * Parses a request body's UTF-8 bytes under the guard: empty, too deep, too
 * many values or not JSON are each a 400 `gw.client.invalid_json`. The shape
 * is checked on the bytes, so a body over a limit costs no decoding. A large
 * body is decoded and parsed in loop turns of their own.
 */
export async function parseRequestBody(bytes: Uint8Array): Promise<unknown> {
  const shape = jsonShapeOfBytes(bytes, { depth: MAX_JSON_DEPTH, values: MAX_JSON_VALUES });
  if (shape.over) throw overLimit("request body", { over: shape.over, unit: "byte" });
  const large = bytes.length >= OWN_TURN_BYTES;
  if (large) await nextTurn();
  const text = UTF8.decode(bytes);
  if (text.trim() === "") throw invalidJson("request body is empty; send a JSON object");
  if (large) await nextTurn();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw invalidJson(`request body is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof body === "object" && body !== null) {
    bodyValues.set(body, shape.values);
    clientSizes.set(body, bytes.length);
  }
  return body;
}

/**
 * The JSON texts inside a client's request, checked once as the client's
 * codec finishes: each tool call's arguments, and each tool result that
 * reads as JSON (its first character other than a space is `{` or `[`).
 * Each must nest no deeper than the body may, and together with the body
 * they hold at most `MAX_JSON_VALUES` values; otherwise the request is a 400
 * `gw.client.invalid_json` before any upstream sees it. A text that passed
 * parses in bounded time whenever a translation needs its object
 * (`toolArguments`, `toolResultJson`).
 */
export function guardRequestJson(ir: IrRequest, body: unknown): IrRequest {
  if (isRecord(body) && clientSizes.has(body)) clientSizes.set(ir, clientSizes.get(body)!);
  const counted = isRecord(body) ? bodyValues.get(body) ?? 0 : 0;
  let left = MAX_JSON_VALUES - counted;
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let m = 0; m < ir.messages.length; m++) {
    const content = ir.messages[m]!.content;
    for (let p = 0; p < content.length; p++) {
      const part = content[p]!;
      const text = jsonTextOf(part);
      if (text === null) continue;
      const shape = jsonShape(text, { depth: MAX_JSON_DEPTH, values: left });
      if (shape.over) throw overLimit(describe(part), { over: shape.over });
      left -= shape.values;
    }
  }
  return ir;
}

/** The JSON text a part carries, if the gateway may parse it. */
function jsonTextOf(part: IrPart): string | null {
  if (part.type === "tool_call") return part.arguments;
  if (part.type === "tool_result" && readsAsJson(part.content)) return part.content;
  return null;
}

function readsAsJson(text: string): boolean {
  return /^\s*[[{]/.test(text);
}

function describe(part: IrPart): string {
  if (part.type === "tool_call") return `the arguments of tool call ${echoed(part.id)}`;
  if (part.type === "tool_result") return `the result of tool call ${echoed(part.toolCallId)}`;
  return "a JSON text";
}

/** Parsed arguments per tool-call part: each translation of a request reads the same object. */
const parsedArguments = new WeakMap<IrPart, Record<string, unknown>>();

/**
 * A tool call's arguments as the object a translation sends (Anthropic
 * `input`, Gemini `args`, Bedrock `input`), parsed once per request whatever
 * the number of hops and targets, under the guard. Empty arguments are `{}`;
 * anything but a JSON object is a 400 naming `param`.
 */
export function toolArguments(
  part: Extract<IrPart, { type: "tool_call" }>,
  param: string,
): Record<string, unknown> {
  const known = parsedArguments.get(part);
  if (known) return known;
  const value = part.arguments.trim() === "" ? {} : guardedParse(part.arguments, {
    what: describe(part),
  });
  if (!isRecord(value)) throw clientError(`'${param}' must be a JSON object`, { param });
  parsedArguments.set(part, value);
  return value;
}

/** Parsed JSON tool results per part; `undefined` when the text is not JSON. */
const parsedResults = new WeakMap<IrPart, { value: unknown }>();

/**
 * A tool result's text as JSON (Gemini's `functionResponse.response` wants
 * an object), parsed once per request; `undefined` for text that is not
 * JSON. Text that reads as JSON is parsed under the guard; any other text is
 * at most one number, string or literal, which has no shape to bound.
 */
export function toolResultJson(part: Extract<IrPart, { type: "tool_result" }>): unknown {
  const known = parsedResults.get(part);
  if (known) return known.value;
  let value: unknown = undefined;
  try {
    value = readsAsJson(part.content)
      ? guardedParse(part.content, { what: describe(part) })
      : JSON.parse(part.content);
  } catch (err) {
    if (err instanceof GatewayError) throw err; // over the guard: the 400
  }
  parsedResults.set(part, { value });
  return value;
}

/**
 * Parses a JSON text from a client under the guard (its own depth, and the
 * values allowance of one request); throws the 400 when it is over, and
 * `JSON.parse`'s own error when it is not JSON.
 */
export function guardedParse(text: string, opts: { what: string; param?: string }): unknown {
  const shape = jsonShape(text, { depth: MAX_JSON_DEPTH, values: MAX_JSON_VALUES });
  if (shape.over) throw overLimit(opts.what, { over: shape.over, param: opts.param });
  return JSON.parse(text);
}
