import type { RequestTrace } from "../../db/records.ts";

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) for one request:
 * the client's `traceparent` continued, or a new trace. docs/observability.md
 * "Traces" says what the gateway records and sends upstream.
 */

// version-traceid-parentid-flags, lowercase hex only; a later version may append fields.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ALL_ZEROS = /^0+$/;
/** Printable ASCII; 512 characters is what the W3C asks every participant to pass on. */
const TRACESTATE = /^[\x20-\x7e]{1,512}$/;

export interface ParsedTraceparent {
  traceId: string;
  parentSpanId: string;
  flags: number;
}

/** The client's `traceparent`, or null when absent or invalid (then a new trace starts). */
export function parseTraceparent(value: string | null): ParsedTraceparent | null {
  const m = value === null ? null : TRACEPARENT.exec(value.trim());
  if (!m) return null;
  const [, version, traceId, parentSpanId, flags, rest] = m as unknown as string[];
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (ALL_ZEROS.test(traceId!) || ALL_ZEROS.test(parentSpanId!)) return null;
  return { traceId: traceId!, parentSpanId: parentSpanId!, flags: parseInt(flags!, 16) };
}

/** The character codes of the hex digits. */
const DIGITS = Array.from("0123456789abcdef", (c) => c.charCodeAt(0));
/**
 * Random bytes drawn 4 KiB at a time: one `getRandomValues` serves about 170 requests (a
 * trace id and a span id each, and a span per attempt) instead of one call per id.
 */
const POOL = new Uint8Array(4096);
let poolAt = POOL.length;
/** The digits of an id being made, by its byte count: reused, one per size. */
const CODES = new Map<number, number[]>();

/**
 * An id of `bytes` random bytes as one flat string, made in one call: appending two digits at a
 * time made a chain of string pieces (each over 12 characters is a pointer pair, ten for a
 * trace id) that every live request kept (docs/performance_log.md "One object per held stream").
 */
function randomHex(bytes: number): string {
  if (poolAt + bytes > POOL.length) {
    crypto.getRandomValues(POOL);
    poolAt = 0;
  }
  let codes = CODES.get(bytes);
  if (!codes) CODES.set(bytes, codes = new Array<number>(bytes * 2).fill(0));
  let zeros = true;
  for (let i = 0; i < bytes; i++) {
    const b = POOL[poolAt + i]!;
    if (b !== 0) zeros = false;
    codes[2 * i] = DIGITS[b >> 4]!;
    codes[2 * i + 1] = DIGITS[b & 15]!;
  }
  poolAt += bytes;
  // All zeros is the one invalid id; at 2^-64 odds, flip a bit rather than draw again.
  if (zeros) codes[bytes * 2 - 1] = DIGITS[1]!;
  return String.fromCharCode.apply(null, codes);
}

export function newSpanId(): string {
  return randomHex(8);
}

/**
 * The trace context of a request arriving with these headers. `recording`
 * (some traces destination is on) and the client's sampled flag decide
 * whether its spans are exported and whether upstream calls name our spans.
 */
export function incomingTrace(headers: Headers, opts: { recording: boolean }): RequestTrace {
  const parent = parseTraceparent(headers.get("traceparent"));
  const state = parent ? headers.get("tracestate") : null;
  const sampled = parent ? (parent.flags & 1) === 1 : true;
  return {
    traceId: parent?.traceId ?? randomHex(16),
    spanId: newSpanId(),
    parentSpanId: parent?.parentSpanId ?? null,
    flags: parent?.flags ?? 1,
    traceState: state !== null && TRACESTATE.test(state) ? state : null,
    recorded: opts.recording && sampled,
  };
}

/** A `traceparent` value naming `spanId` in this trace, with the trace's flags. */
export function formatTraceparent(trace: RequestTrace, spanId: string): string {
  return `00-${trace.traceId}-${spanId}-${trace.flags.toString(16).padStart(2, "0")}`;
}
