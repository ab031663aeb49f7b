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
}

/**
 * Splits bytes into SSE blocks, incrementally. Raw text is kept per block so
 * a same-format stream can be passed on byte for byte after inspection; this
 * is the only place in the gateway that reads `data:` lines.
 */
export class SseParser {
  #decoder = new TextDecoder();
  #buffer = "";
  /** Where the search for a blank line resumes: text before it was searched already. */
  #scanFrom = 0;

  push(chunk: Uint8Array): SseEvent[] {
    this.#buffer += this.#decoder.decode(chunk, { stream: true });
    return this.#drain(false);
  }

  /** The last block, when the stream ended without its blank line. */
  end(): SseEvent[] {
    this.#buffer += this.#decoder.decode();
    return this.#drain(true);
  }

  #drain(final: boolean): SseEvent[] {
    const text = this.#buffer;
    const out: SseEvent[] = [];
    const blank = /\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n/g;
    let start = 0;
    // A long event arriving in many chunks is searched once, not again from its start per chunk.
    let from = this.#scanFrom;
    for (;;) {
      blank.lastIndex = Math.max(start, from);
      from = 0;
      const match = blank.exec(text);
      if (!match) break;
      let end = match.index + match[0].length;
      // "\r\r" may be followed by the "\n" of a CRLF: keep it with this block.
      if (match[0] === "\r\r" && text[end] === "\n") end++;
      out.push(parseBlock(text.slice(start, end)));
      start = end;
    }
    this.#buffer = text.slice(start);
    // A terminator is at most four characters: its start may be among the last three seen.
    this.#scanFrom = Math.max(0, this.#buffer.length - 3);
    if (final && this.#buffer.trim() !== "") {
      out.push(parseBlock(this.#buffer));
      this.#buffer = "";
    }
    return out;
  }
}

/** SseParser as a stream, for callers that want one. */
export class SseDecoderStream extends TransformStream<Uint8Array, SseEvent> {
  constructor() {
    const parser = new SseParser();
    super({
      transform(chunk, controller) {
        for (const event of parser.push(chunk)) controller.enqueue(event);
      },
      flush(controller) {
        for (const event of parser.end()) controller.enqueue(event);
      },
    });
  }
}

function parseBlock(raw: string): SseEvent {
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
