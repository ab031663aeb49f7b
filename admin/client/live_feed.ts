import { signal } from "@preact/signals";
import type { LiveSnapshot } from "../api_types.ts";
import { ApiFailure } from "./api.ts";
import { createSseParser } from "./sse_parser.ts";

export type FeedStatus = "idle" | "connecting" | "open" | "retrying";

export interface LiveFeedIo {
  /** Opens GET /admin/api/live with the tab's token. */
  open: (signal: AbortSignal) => Promise<Response>;
  /** Resolves after `ms`, or early when the signal fires. */
  wait: (ms: number, signal: AbortSignal) => Promise<void>;
}

const RETRY_MS = [500, 1000, 2000, 5000];

/**
 * The live list's data: the latest snapshot pushed by the gateway. A dropped connection is
 * reopened with backoff; a refused token ends the feed (the API client signs the tab out).
 */
export function createLiveFeed(io: LiveFeedIo) {
  const snapshot = signal<LiveSnapshot | null>(null);
  const status = signal<FeedStatus>("idle");
  let running: AbortController | null = null;

  const readOnce = async (abort: AbortSignal) => {
    const res = await io.open(abort);
    status.value = "open";
    const parse = createSseParser((event) => {
      if (event.event === "snapshot") snapshot.value = JSON.parse(event.data) as LiveSnapshot;
    });
    const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
    if (!reader) return;
    const cancel = () => void reader.cancel().catch(() => {});
    abort.addEventListener("abort", cancel, { once: true });
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        parse(value);
      }
    } finally {
      abort.removeEventListener("abort", cancel);
    }
  };

  const loop = async (abort: AbortSignal) => {
    for (let failures = 0; !abort.aborted;) {
      status.value = failures === 0 ? "connecting" : "retrying";
      try {
        await readOnce(abort);
        failures = 0;
      } catch (err) {
        if (err instanceof ApiFailure && err.detail.status === 401) break;
        failures++;
      }
      if (abort.aborted) break;
      await io.wait(RETRY_MS[Math.min(failures, RETRY_MS.length - 1)] ?? 5000, abort);
    }
  };

  return {
    snapshot,
    status,
    start() {
      if (running) return;
      const controller = new AbortController();
      running = controller;
      void loop(controller.signal).finally(() => {
        if (running === controller) running = null;
        if (running === null) status.value = "idle";
      });
    },
    stop() {
      running?.abort();
      running = null;
      snapshot.value = null;
    },
  };
}

export type LiveFeed = ReturnType<typeof createLiveFeed>;
