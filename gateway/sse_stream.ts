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
 * Splits a byte stream into SSE blocks. Raw text is kept per block so a
 * same-format stream can be passed on byte for byte after inspection; this is
 * the only place in the gateway that reads `data:` lines.
 */
export class SseDecoderStream extends TransformStream<Uint8Array, SseEvent> {
  constructor() {
    const decoder = new TextDecoder();
    let buffer = "";
    const drain = (controller: TransformStreamDefaultController<SseEvent>, final: boolean) => {
      for (;;) {
        const end = blockEnd(buffer);
        if (end < 0) break;
        controller.enqueue(parseBlock(buffer.slice(0, end)));
        buffer = buffer.slice(end);
      }
      if (final && buffer.trim() !== "") controller.enqueue(parseBlock(buffer));
    };
    super({
      transform(chunk, controller) {
        buffer += decoder.decode(chunk, { stream: true });
        drain(controller, false);
      },
      flush(controller) {
        buffer += decoder.decode();
        drain(controller, true);
      },
    });
  }
}

/** Index just past the blank line that ends the first block, or -1. */
function blockEnd(text: string): number {
  const match = /\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n/.exec(text);
  if (!match) return -1;
  // A lone trailing "\r" may be half of "\r\n": wait for more.
  const end = match.index + match[0].length;
  if (match[0] === "\r\r" && text[end] === "\n") return end + 1;
  return end;
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

/** Serialises events to SSE text; the inverse of SseDecoderStream. */
export class SseEncoderStream extends TransformStream<SseOut, Uint8Array> {
  constructor() {
    const encoder = new TextEncoder();
    super({
      transform(out, controller) {
        controller.enqueue(encoder.encode(formatSse(out)));
      },
    });
  }
}

export function formatSse(out: SseOut): string {
  if ("comment" in out) return `: ${out.comment}\n\n`;
  const lines = out.data.split("\n").map((line) => `data: ${line}`).join("\n");
  return out.event ? `event: ${out.event}\n${lines}\n\n` : `${lines}\n\n`;
}
