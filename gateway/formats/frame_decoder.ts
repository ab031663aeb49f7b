import type { UpstreamFrame } from "./format.ts";

/**
 * Cuts an upstream body into frames synchronously, one chunk at a time. The
 * stream path drives it straight from the body's reader, so a chunk costs no
 * stream stage of its own; `frameStream` wraps it for callers that want one.
 */
export interface FrameDecoder {
  /** The frames a chunk completes (none while an event is still arriving). */
  push(chunk: Uint8Array): UpstreamFrame[];
  /** The frames left when the body ends. */
  end(): UpstreamFrame[];
}

/** A decoder as a stream step. */
export function frameStream(decoder: FrameDecoder): TransformStream<Uint8Array, UpstreamFrame> {
  return new TransformStream<Uint8Array, UpstreamFrame>({
    transform(chunk, controller) {
      for (const frame of decoder.push(chunk)) controller.enqueue(frame);
    },
    flush(controller) {
      for (const frame of decoder.end()) controller.enqueue(frame);
    },
  });
}
