import type { UpstreamFrame } from "./format.ts";
import { SseDecoderStream, type SseEvent } from "./sse_stream.ts";

/** What a format module says about one SSE event. */
export type SseReading = Omit<UpstreamFrame, "raw">;

const encoder = new TextEncoder();

/**
 * Turns an SSE body into frames using a format's reader. SSE comments are
 * keep-alives for every format (SPEC §5), so readers never see them.
 */
export function sseFrameStream(
  read: (event: SseEvent) => SseReading,
): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  const frames = new TransformStream<SseEvent, UpstreamFrame>({
    transform(event, controller) {
      const raw = encoder.encode(event.raw);
      if (event.comment) controller.enqueue({ raw, content: false, events: [] });
      else controller.enqueue({ raw, ...read(event) });
    },
  });
  const decoder = new SseDecoderStream();
  return { writable: decoder.writable, readable: decoder.readable.pipeThrough(frames) };
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
