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

/** The ASCII codes of the 16 hex digits. */
const DIGITS = Array.from("0123456789abcdef", (c) => c.charCodeAt(0));
/** Random bytes drawn 4 KiB at a time, written out as 8 KiB of hex digits. */
const POOL_BYTES = 4096;
const RANDOM = new Uint8Array(POOL_BYTES);
const HEX_CODES = new Uint8Array(POOL_BYTES * 2);
const ASCII = new TextDecoder();
/**
 * One string of random hex digits, made once per about 170 requests (a trace id and a span id
 * each, and a span per attempt): each id is a slice of it, one string, where building an id
 * digit pair by digit pair made a new string per byte (two dozen per request).
 */
let pool = "";
let poolAt = 0;

function refill(): void {
  crypto.getRandomValues(RANDOM);
  for (let i = 0; i < POOL_BYTES; i++) {
    const b = RANDOM[i]!;
    HEX_CODES[2 * i] = DIGITS[b >> 4]!;
    HEX_CODES[2 * i + 1] = DIGITS[b & 15]!;
  }
  pool = ASCII.decode(HEX_CODES);
  poolAt = 0;
}

const ZEROS: Record<number, string> = { 16: "0".repeat(16), 32: "0".repeat(32) };

function randomHex(bytes: 8 | 16): string {
  const digits = bytes * 2;
  if (poolAt + digits > pool.length) refill();
  const hex = pool.slice(poolAt, poolAt + digits);
  poolAt += digits;
  // All zeros is the one invalid id; at 2^-64 odds, flip a bit rather than draw again.
  return hex === ZEROS[digits] ? `${hex.slice(0, -1)}1` : hex;
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
