import { UPSTREAM_CAPS } from "./upstream_caps.ts";

/** One server-sent event as it arrived, with the exact text that carried it. */
export interface SseEvent {
  /** The `event:` field, or undefined for the default `message` type. */
  event?: string;
  /** `data:` lines joined with "\n"; undefined when the block had no data line. */
  data?: string;
  /** True for a block made only of comment lines (`: keep-alive`). */
  comment: boolean;
  /** The block's bytes as received, blank-line terminator included. */
  raw: string;
  /**
   * The same block as the bytes it came in, where the parser could cut them
   * out of one chunk (see `SseParser.push`): passing them on needs no encoding.
   */
  bytes?: Uint8Array;
}

/**
 * Splits bytes into SSE blocks, incrementally. Raw text is kept per block so
 * a same-format stream can be passed on byte for byte after inspection; this
 * is the only place in the gateway that reads `data:` lines.
 *
 * Linear in its input: each chunk is searched for a blank line once (with
 * the few characters before it that a terminator may start in), and a block
 * still arriving is kept in pieces, joined once when its blank line comes.
 * A block may grow to `maxEventChars` (UPSTREAM_CAPS.eventBytes by default);
 * past that the parser sets `oversized` and takes nothing more.
 */
export class SseParser {
  #decoder = new TextDecoder();
  /** The block still arriving, not yet joined: no blank line in it. */
  #pieces: string[] = [];
  #pending = 0;
  /** The block's last characters, searched already: a terminator may start among them. */
  #carry = "";
  readonly #max: number;
  #oversized = false;
  /** Whether the last chunk ended on a whole character: the decoder then holds no byte. */
  #cleanEnd = true;

  constructor(opts: { maxEventChars?: number } = {}) {
    this.#max = opts.maxEventChars ?? UPSTREAM_CAPS.eventBytes;
  }

  /** True once a block outgrew the cap; every later push answers nothing. */
  get oversized(): boolean {
    return this.#oversized;
  }

  /**
   * The events a chunk completes. Where the chunk starts a block and is all
   * one-byte characters, each event also gets its bytes: one copy of the chunk
   * (the caller's buffer is reused), cut into views, so the bytes of events
   * passed on unchanged go out as they came (docs/benchmarks.md).
   */
  push(chunk: Uint8Array): SseEvent[] {
    if (this.#oversized) return [];
    const text = this.#decoder.decode(chunk, { stream: true });
    const aligned = this.#cleanEnd && this.#pieces.length === 0 &&
      text.length === chunk.byteLength;
    this.#cleanEnd = chunk.byteLength === 0 || chunk[chunk.byteLength - 1]! < 0x80;
    return this.#take(text, { final: false, bytes: aligned ? chunk : undefined });
  }

  /** The last block, when the stream ended without its blank line. */
  end(): SseEvent[] {
    if (this.#oversized) return [];
    return this.#take(this.#decoder.decode(), { final: true });
  }

  /** `bytes`: the chunk `text` was decoded from, one byte per character, starting a block. */
  #take(text: string, opts: { final: boolean; bytes?: Uint8Array }): SseEvent[] {
    const { final } = opts;
    const out: SseEvent[] = [];
    let copy: Uint8Array | undefined;
    const window = this.#carry + text;
    // What providers send has no "\r": searched for "\n\n" alone (`blankAt`).
    const plain = !window.includes("\r");
    if (blankAt(window, 0, plain) >= 0) {
      // Join once: the pieces before the carry were searched and hold no terminator.
      const joined = this.#pieces.join("") + text;
      this.#pieces = [];
      let start = 0;
      let from = joined.length - window.length;
      for (;;) {
        const at = blankAt(joined, Math.max(start, from), plain);
        if (at < 0) break;
        let end = at + blankLength;
        // "\r\r" may be followed by the "\n" of a CRLF: keep it with this block, so wait for it.
        const crcr = blankLength === 2 && joined.charCodeAt(at) === 13;
        if (crcr && end === joined.length && !final) break;
        if (crcr && joined[end] === "\n") end++;
        const event = parseBlock(joined.slice(start, end));
        // With no pieces before it, `joined` is this chunk's text: its offsets are the bytes'.
        if (opts.bytes) event.bytes = (copy ??= opts.bytes.slice()).subarray(start, end);
        out.push(event);
        start = end;
        from = end;
      }
      const rest = joined.slice(start);
      if (rest !== "") this.#pieces.push(rest);
      this.#pending = rest.length;
      this.#carry = rest.slice(-3);
    } else if (text !== "") {
      this.#pieces.push(text);
      this.#pending += text.length;
      // A terminator is at most four characters: its start may be among the last three seen.
      this.#carry = window.slice(-3);
    }
    if (this.#pending > this.#max) {
      this.#oversized = true;
      this.#pieces = [];
      this.#pending = 0;
      return out;
    }
    if (final && this.#pending > 0) {
      const rest = this.#pieces.join("");
      this.#pieces = [];
      this.#pending = 0;
      if (rest.trim() !== "") out.push(parseBlock(rest));
    }
    return out;
  }
}

const BLANK_LINE = /\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n/g;

/** The length of the blank line `blankAt` last found. */
let blankLength = 0;

/**
 * Where the next blank line in `text` starts at or after `from`, or -1; its length is left in
 * `blankLength`. `plain` text (no "\r") is searched for "\n\n" alone: no match object per
 * event, the stream path's commonest case (docs/performance_log.md "One object per held
 * stream").
 */
function blankAt(text: string, from: number, plain: boolean): number {
  if (plain) {
    blankLength = 2;
    return text.indexOf("\n\n", from);
  }
  BLANK_LINE.lastIndex = from;
  const match = BLANK_LINE.exec(text);
  blankLength = match ? match[0].length : 0;
  return match ? match.index : -1;
}

/** SseParser as a stream, for callers that want one; a block over the cap errors the stream. */
export class SseDecoderStream extends TransformStream<Uint8Array, SseEvent> {
  constructor() {
    const parser = new SseParser();
    super({
      transform(chunk, controller) {
        for (const event of parser.push(chunk)) controller.enqueue(event);
        if (parser.oversized) controller.error(new Error("an SSE event over the size cap"));
      },
      flush(controller) {
        for (const event of parser.end()) controller.enqueue(event);
      },
    });
  }
}

function parseBlock(raw: string): SseEvent {
  // The common block, one `data:` line and "\n\n": no split needed.
  const nl = raw.indexOf("\n");
  if (nl === raw.length - 2 && raw.endsWith("\n\n") && raw.startsWith("data:")) {
    const value = raw.slice(raw.charCodeAt(5) === 32 ? 6 : 5, nl);
    if (!value.includes("\r")) return { event: undefined, data: value, comment: false, raw };
  }
  let event: string | undefined;
  let data: string[] | undefined;
  let fields = 0;
  for (const line of raw.split(/\r\n|\r|\n/)) {
    if (line === "") continue;
    if (line.startsWith(":")) continue;
    fields++;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") event = value;
    else if (name === "data") (data ??= []).push(value);
  }
  return { event, data: data?.join("\n"), comment: fields === 0, raw };
}

/** A block ready to send: either fields or a comment. */
export type SseOut =
  | { event?: string; data: string }
  | { comment: string };

/** The keep-alive comment every SSE client format takes (docs/design.md, the opening hold). */
export const KEEP_ALIVE_BLOCK: Uint8Array = new TextEncoder().encode(": keep-alive\n\n");

export function formatSse(out: SseOut): string {
  if ("comment" in out) return `: ${out.comment}\n\n`;
  const lines = out.data.split("\n").map((line) => `data: ${line}`).join("\n");
  return out.event ? `event: ${out.event}\n${lines}\n\n` : `${lines}\n\n`;
}
