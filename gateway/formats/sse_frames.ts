import type { UpstreamFrame } from "./format.ts";
import { isRecord, parseJson } from "../runtime/json.ts";
import { type SseEvent, SseParser } from "./sse_stream.ts";
import { badResponse } from "./upstream_error.ts";
import { oversized, UPSTREAM_CAPS } from "./upstream_caps.ts";
import type { FrameDecoder } from "./frame_decoder.ts";

/** What a format module says about one SSE event. */
export type SseReading = Omit<UpstreamFrame, "raw">;

/** A format's reader of one event: its fields, and its data parsed as JSON (undefined if none). */
export type SseRead = (event: SseEvent, json: unknown) => SseReading;

/**
 * A format's reading of an event from its text alone, for the common events
 * whose meaning a byte-level look settles (a plain text delta): a whole frame
 * whose `events` may be built only when read, or null to parse as usual.
 */
export type QuickRead = (data: string, raw: Uint8Array) => UpstreamFrame | null;

const encoder = new TextEncoder();

/**
 * Turns an SSE body into frames using a format's reader, chunk by chunk.
 * What every SSE format shares is decided here, once:
 * - comments, and blocks with no data, are keep-alives (docs/design.md "Pulse"): readers never see them
 *   (but for a bare JSON object, which is how Google tells an error after the 200);
 * - every provider sends JSON (or `[DONE]`) as data, so data that does not
 *   parse is a broken stream, not content to pass on;
 * - a block cut off by the end of the body is not dispatched (as the SSE
 *   standard says), unless it is whole but for its blank line: then it is
 *   completed, so a client fed the raw bytes never sees half an event;
 * - an event growing past UPSTREAM_CAPS.eventBytes is a broken stream too
 *   (`gw.upstream.oversized`), whatever the format.
 */
export function sseFrameDecoder(read: SseRead, opts: { quick?: QuickRead } = {}): FrameDecoder {
  return new SseFrameDecoder(read, opts.quick);
}

/**
 * `sseFrameDecoder`'s one object: methods rather than closures, and its parser made at the
 * first chunk, since a held stream may receive nothing for minutes and thousands may be held
 * at once (docs/performance_log.md "One object per held stream").
 */
class SseFrameDecoder implements FrameDecoder {
  readonly #read: SseRead;
  readonly #quick: QuickRead | undefined;
  #parser: SseParser | null = null;
  #reported = false;

  constructor(read: SseRead, quick: QuickRead | undefined) {
    this.#read = read;
    this.#quick = quick;
  }

  push(chunk: Uint8Array): UpstreamFrame[] {
    const parser = this.#parser ??= new SseParser();
    const events = parser.push(chunk);
    const frames: UpstreamFrame[] = [];
    for (const event of events) frames.push(this.#frame(event));
    // Reported once; the parser takes nothing more, and the hop drops the connection.
    if (parser.oversized && !this.#reported) {
      this.#reported = true;
      const error = oversized("an event", UPSTREAM_CAPS.eventBytes);
      frames.push({ raw: new Uint8Array(0), content: true, events: [], error });
    }
    return frames;
  }

  end(): UpstreamFrame[] {
    const parser = this.#parser ??= new SseParser();
    return parser.end().map((tail) => {
      const whole = tail.comment || tail.data === undefined || tail.data.trim() === "[DONE]" ||
        parseJson(tail.data) !== undefined;
      return whole
        ? this.#frame({ ...tail, raw: `${tail.raw}\n\n`, bytes: undefined })
        : malformed(new Uint8Array(0), "the upstream's stream ended inside an event");
    });
  }

  #frame(event: SseEvent): UpstreamFrame {
    const raw = event.bytes ?? encoder.encode(event.raw);
    if (event.comment) return { raw, content: false, events: [] };
    // Google's API tells a failure after the 200 as a bare JSON object, with no `data:` field.
    const data = event.data ?? bareJson(event.raw);
    // The SSE standard dispatches no event for any other block without data (a stray line).
    if (data === undefined) return { raw, content: false, events: [] };
    const quick = event.data === undefined ? null : this.#quick?.(data, raw);
    if (quick) return quick;
    const json = parseJson(data);
    if (json === undefined && data.trim() !== "[DONE]") {
      return malformed(raw, "the upstream sent an event whose data is not JSON");
    }
    return { raw, ...this.#read(event.data === undefined ? { ...event, data } : event, json) };
  }
}

/** A block that is one JSON object without SSE fields, as its text. */
function bareJson(raw: string): string | undefined {
  const text = raw.trim();
  return text.startsWith("{") && isRecord(parseJson(text)) ? text : undefined;
}

function malformed(raw: Uint8Array, why: string): UpstreamFrame {
  return { raw, content: true, events: [], error: badResponse(why) };
}
