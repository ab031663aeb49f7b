import type { Clock } from "../gateway/runtime/clock.ts";
import type { Logger } from "../gateway/runtime/logger.ts";
import type { LiveRow, LiveSnapshot } from "./api_types.ts";

/** How often the live list refreshes, in configured milliseconds (scaled by the clock). */
export const LIVE_TICK_MS = 500;
// A scaled test clock would otherwise spin the loop every few milliseconds.
const MIN_REAL_TICK_MS = 50;

const encoder = new TextEncoder();

export interface LiveEventsOptions {
  clock: Clock;
  /** The tab's page now; the signal fires when the tab goes. */
  snapshot: (signal: AbortSignal) => Promise<LiveSnapshot>;
  /** True once the gateway is stopping: the stream ends, so shutdown is not held by a tab. */
  stopping: () => boolean;
  /** The client's request signal: a closed tab stops the loop. */
  signal: AbortSignal;
  /** Called once when the stream ends, however it ends. */
  onEnd?: () => void;
  log?: Logger;
}

/**
 * Server-sent events for the live list: a `snapshot` event at once, and then every tick either
 * the page again when it changed, or a `heartbeat` event (`{"at": ...}`) when it did not: the
 * page's times then move on by the heartbeat's clock (docs/admin.md "Live requests"). The page
 * reads them with fetch streaming rather than EventSource, which cannot send the Authorization
 * header.
 */
export function liveEvents(opts: LiveEventsOptions): ReadableStream<Uint8Array> {
  const { clock } = opts;
  // The clock time 50 real ms span: a faster clock must not make the feed a busy loop.
  const tickMs = Math.max(LIVE_TICK_MS, clock.elapsed(0, MIN_REAL_TICK_MS));
  let cancelTimer = () => {};
  let done = false;
  let sent: string | null = null;
  const stopped = new AbortController();
  const stop = () => {
    if (done) return;
    done = true;
    cancelTimer();
    stopped.abort();
    opts.signal.removeEventListener("abort", stop);
    opts.onEnd?.();
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      opts.signal.addEventListener("abort", stop, { once: true });
      const tick = async () => {
        if (done) return;
        if (opts.stopping()) {
          stop();
          controller.close();
          return;
        }
        try {
          const snapshot = await opts.snapshot(stopped.signal);
          if (done) return;
          const key = pageKey(snapshot);
          controller.enqueue(
            encoder.encode(key === sent ? heartbeatEvent(snapshot.at) : snapshotEvent(snapshot)),
          );
          sent = key;
        } catch (err) {
          if (done) return;
          opts.log?.event("live.tick_failed", { error: String(err) });
        }
        cancelTimer = clock.after(tickMs, () => void tick());
      };
      // A comment first, so proxies in front see a byte before the first snapshot is built.
      controller.enqueue(encoder.encode(": live\n\n"));
      void tick();
    },
    cancel: stop,
  });
}

export function snapshotEvent(snapshot: LiveSnapshot): string {
  return `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
}

export function heartbeatEvent(at: number): string {
  return `event: heartbeat\ndata: {"at":${at}}\n\n`;
}

/**
 * What makes a page different from the last one sent: everything but the times that only move
 * with the clock (elapsed and idle), which the tab moves on itself by each heartbeat's `at`. A
 * row's last content time stands for its idle time, so content that moved is a change.
 */
export function pageKey(snapshot: LiveSnapshot): string {
  const rows = snapshot.requests.map((row: LiveRow) => {
    const { elapsedMs: _elapsed, idleMs, ...rest } = row;
    return { ...rest, contentAt: idleMs === null ? null : row.startedAt + row.elapsedMs - idleMs };
  });
  return JSON.stringify({ ...snapshot, at: 0, requests: rows });
}
