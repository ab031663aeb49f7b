import type { Clock } from "../gateway/runtime/clock.ts";
import type { LiveSnapshot } from "./api_types.ts";

/** How often the live list refreshes, in configured milliseconds (scaled by the clock). */
export const LIVE_TICK_MS = 500;
// A scaled test clock would otherwise spin the loop every few milliseconds.
const MIN_REAL_TICK_MS = 50;

const encoder = new TextEncoder();

export interface LiveEventsOptions {
  clock: Clock;
  snapshot: () => LiveSnapshot;
  /** True once the gateway is stopping: the stream ends, so shutdown is not held by a tab. */
  stopping: () => boolean;
  /** The client's request signal: a closed tab stops the loop. */
  signal: AbortSignal;
}

/**
 * Server-sent events for the live list: a `snapshot` event at once and then every tick. The
 * page reads them with fetch streaming rather than EventSource, which cannot send the
 * Authorization header.
 */
export function liveEvents(opts: LiveEventsOptions): ReadableStream<Uint8Array> {
  const { clock } = opts;
  // The clock time 50 real ms span: a faster clock must not make the feed a busy loop.
  const tickMs = Math.max(LIVE_TICK_MS, clock.elapsed(0, MIN_REAL_TICK_MS));
  let cancelTimer = () => {};
  let done = false;
  const stop = () => {
    done = true;
    cancelTimer();
    opts.signal.removeEventListener("abort", stop);
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      opts.signal.addEventListener("abort", stop, { once: true });
      const tick = () => {
        if (done) return;
        if (opts.stopping()) {
          stop();
          controller.close();
          return;
        }
        controller.enqueue(encoder.encode(snapshotEvent(opts.snapshot())));
        cancelTimer = clock.after(tickMs, tick);
      };
      // A comment first, so proxies in front see a byte before the first snapshot is built.
      controller.enqueue(encoder.encode(": live\n\n"));
      tick();
    },
    cancel: stop,
  });
}

export function snapshotEvent(snapshot: LiveSnapshot): string {
  return `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
}
