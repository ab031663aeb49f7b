import type { UpstreamFrame } from "./format.ts";
import { type SseEvent, SseParser } from "./sse_stream.ts";

/** What a format module says about one SSE event. */
export type SseReading = Omit<UpstreamFrame, "raw">;

const encoder = new TextEncoder();

/**
 * Turns an SSE body into frames using a format's reader, in one stream step.
 * SSE comments are keep-alives for every format (SPEC §5), so readers never
 * see them.
 */
export function sseFrameStream(
  read: (event: SseEvent) => SseReading,
): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  const parser = new SseParser();
  const frame = (event: SseEvent): UpstreamFrame => {
    const raw = encoder.encode(event.raw);
    return event.comment ? { raw, content: false, events: [] } : { raw, ...read(event) };
  };
  return new TransformStream<Uint8Array, UpstreamFrame>({
    transform(chunk, controller) {
      for (const event of parser.push(chunk)) controller.enqueue(frame(event));
    },
    flush(controller) {
      for (const event of parser.end()) controller.enqueue(frame(event));
    },
  });
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
