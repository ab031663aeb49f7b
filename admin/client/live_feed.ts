import { batch, signal } from "@preact/signals";
import type { LiveSnapshot } from "../api_types.ts";
import { ApiFailure } from "./api.ts";
import { advance, ALL_LIVE, type LiveView, viewQuery } from "./live_view.ts";
import { createSseParser } from "./sse_parser.ts";

export type FeedStatus = "idle" | "connecting" | "open" | "retrying";

export interface LiveFeedIo {
  /** Opens GET /admin/api/live with these URL parameters and the tab's token. */
  open: (query: string, signal: AbortSignal) => Promise<Response>;
  /** Resolves after `ms`, or early when the signal fires. */
  wait: (ms: number, signal: AbortSignal) => Promise<void>;
}

const RETRY_MS = [500, 1000, 2000, 5000];

/**
 * The live list's data: the page the gateway pushes for the tab's view, kept up to date by its
 * `snapshot` events and moved on by its `heartbeat`s. A new view or page reopens the feed at
 * once; a dropped connection is reopened with backoff; a refused token ends the feed (the API
 * client signs the tab out).
 */
export function createLiveFeed(io: LiveFeedIo) {
  const snapshot = signal<LiveSnapshot | null>(null);
  const status = signal<FeedStatus>("idle");
  const view = signal<LiveView>(ALL_LIVE);
  /** The `after` cursors of the pages before this one; the last is this page's. */
  const trail = signal<string[]>([]);
  /** The URL parameters the shown snapshot answers: a row leaving it under the same ones ended. */
  const shown = signal<string>("");
  let running: AbortController | null = null;
  /** The open connection; aborted to reopen it with a new view or page. */
  let connection: AbortController | null = null;

  const readOnce = async (abort: AbortSignal) => {
    const after = trail.peek().at(-1) ?? null;
    const query = viewQuery(view.peek(), { after });
    const res = await io.open(query, abort);
    status.value = "open";
    const parse = createSseParser((event) => {
      if (event.event === "snapshot") {
        batch(() => {
          snapshot.value = JSON.parse(event.data) as LiveSnapshot;
          shown.value = query;
        });
      } else if (event.event === "heartbeat") {
        const shown = snapshot.peek();
        const { at } = JSON.parse(event.data) as { at: number };
        if (shown) snapshot.value = advance(shown, at);
      }
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
      const conn = new AbortController();
      connection = conn;
      const stop = () => conn.abort();
      abort.addEventListener("abort", stop, { once: true });
      try {
        await readOnce(conn.signal);
        failures = 0;
      } catch (err) {
        if (err instanceof ApiFailure && err.detail.status === 401) break;
        // Closed for a new view or page: reopened at once.
        if (!conn.signal.aborted) failures++;
      } finally {
        abort.removeEventListener("abort", stop);
      }
      if (abort.aborted) break;
      if (conn.signal.aborted) continue;
      await io.wait(RETRY_MS[Math.min(failures, RETRY_MS.length - 1)] ?? 5000, abort);
    }
  };

  /** Reopens the feed for the view and page now asked. */
  const reopen = () => connection?.abort();

  return {
    snapshot,
    status,
    view,
    trail,
    shown,
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
      view.value = ALL_LIVE;
      trail.value = [];
    },
    /** A new filter, search or order: from its first page. */
    setView(next: LiveView) {
      view.value = next;
      trail.value = [];
      reopen();
    },
    /** The page after this one, when there is one. */
    next() {
      const cursor = snapshot.peek()?.page.next;
      if (!cursor) return;
      trail.value = [...trail.peek(), cursor];
      reopen();
    },
    previous() {
      if (!trail.peek().length) return;
      trail.value = trail.peek().slice(0, -1);
      reopen();
    },
    first() {
      trail.value = [];
      reopen();
    },
  };
}

export type LiveFeed = ReturnType<typeof createLiveFeed>;
