import type { UpstreamFrame } from "./format.ts";
import { parseJson } from "./json.ts";
import { type SseEvent, SseParser } from "./sse_stream.ts";
import { badResponse } from "./upstream_error.ts";

// Moved to json.ts; kept here until every importer is updated.
export { isRecord, parseJson } from "./json.ts";

/** What a format module says about one SSE event. */
export type SseReading = Omit<UpstreamFrame, "raw">;

/** A format's reader of one event: its fields, and its data parsed as JSON (undefined if none). */
export type SseRead = (event: SseEvent, json: unknown) => SseReading;

const encoder = new TextEncoder();

/**
 * Turns an SSE body into frames using a format's reader, in one stream step.
 * What every SSE format shares is decided here, once:
 * - comments, and blocks with no data, are keep-alives (SPEC §5): readers never see them;
 * - every provider sends JSON (or `[DONE]`) as data, so data that does not
 *   parse is a broken stream, not content to pass on;
 * - a block cut off by the end of the body is not dispatched (as the SSE
 *   standard says), unless it is whole but for its blank line: then it is
 *   completed, so a client fed the raw bytes never sees half an event.
 */
export function sseFrameStream(read: SseRead): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  const parser = new SseParser();
  const frame = (event: SseEvent): UpstreamFrame => {
    const raw = encoder.encode(event.raw);
    // The SSE standard dispatches no event for a block without data (a comment, a stray line).
    if (event.comment || event.data === undefined) return { raw, content: false, events: [] };
    const json = parseJson(event.data);
    if (json === undefined && event.data !== undefined && event.data.trim() !== "[DONE]") {
      return malformed(raw, "the upstream sent an event whose data is not JSON");
    }
    return { raw, ...read(event, json) };
  };
  return new TransformStream<Uint8Array, UpstreamFrame>({
    transform(chunk, controller) {
      for (const event of parser.push(chunk)) controller.enqueue(frame(event));
    },
    flush(controller) {
      for (const tail of parser.end()) {
        const whole = tail.comment || tail.data === undefined || tail.data.trim() === "[DONE]" ||
          parseJson(tail.data) !== undefined;
        controller.enqueue(
          whole
            ? frame({ ...tail, raw: `${tail.raw}\n\n` })
            : malformed(new Uint8Array(0), "the upstream's stream ended inside an event"),
        );
      }
    },
  });
}

function malformed(raw: Uint8Array, why: string): UpstreamFrame {
  return { raw, content: true, events: [], error: badResponse(why) };
}
