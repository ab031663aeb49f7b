/**
 * The scripted fake upstreams of server.ts without a socket: the gateway's injected `fetch`
 * (StartOptions.fetch) answers from them in process, and every wait of a script (`wait`,
 * `headerDelay`) is virtual milliseconds on the test's clock. A test of a 300 s idle timeout
 * scripts 300 000 ms of silence and runs in microseconds (tests/virtual_gateway.ts).
 */
import type { Clock } from "../../gateway/runtime/clock.ts";
import {
  type Call,
  type FakeUpstream,
  type Handler,
  openCall,
  type Script,
  type Step,
} from "./server.ts";

const encoder = new TextEncoder();

/** Fake upstreams on one clock, and the `fetch` that reaches them. */
export interface InProcessUpstreams {
  /**
   * A new upstream at `http://<name>.upstream.test`; `fallback` answers the calls past the queue
   * (as startFakeUpstream's). A handler that throws is a connection broken before any header:
   * the gateway's fetch rejects with its error.
   */
  start(name?: string, opts?: { fallback?: Handler }): FakeUpstream;
  /** What the gateway calls in place of the network: only the upstreams started here answer. */
  fetch: typeof fetch;
}

export function inProcessUpstreams(clock: Clock): InProcessUpstreams {
  const byOrigin = new Map<string, (req: Request) => Promise<Response>>();
  let count = 0;
  return {
    start(name = `up${++count}`, opts = {}) {
      const upstream = fakeUpstream(`http://${name}.upstream.test`, clock);
      if (opts.fallback) upstream.setHandler(opts.fallback);
      byOrigin.set(upstream.url, upstream.answer);
      return upstream;
    },
    async fetch(input, init) {
      const req = new Request(input, init);
      const answer = byOrigin.get(new URL(req.url).origin);
      if (!answer) throw new TypeError(`no fake upstream at ${new URL(req.url).origin}`);
      if (req.signal.aborted) throw req.signal.reason;
      return await answer(req);
    },
  };
}

function fakeUpstream(
  url: string,
  clock: Clock,
): FakeUpstream & { answer(req: Request): Promise<Response> } {
  const calls: Call[] = [];
  const queue: Script[] = [];
  const closing = new AbortController();
  const count = { open: 0 };
  let handler: Handler = () => ({ status: 500, body: [{ send: "no script" }] });
  const close = () => {
    closing.abort();
    return Promise.resolve();
  };
  return {
    url,
    calls,
    enqueue: (...scripts) => queue.push(...scripts),
    setHandler: (h) => (handler = h),
    get openConnections() {
      return count.open;
    },
    close,
    [Symbol.asyncDispose]: close,
    async answer(req) {
      const { call, settle } = await openCall(req, count);
      calls.push(call);
      let script: Script;
      try {
        script = queue.shift() ?? (await handler(call));
      } catch (err) {
        settle("ended");
        throw err;
      }
      const gone = AbortSignal.any([req.signal, closing.signal]);
      if (script.headerDelay !== undefined && script.headerDelay !== 0) {
        const ms = script.headerDelay === "never" ? Infinity : script.headerDelay;
        await waitFor(ms, { clock, signal: gone });
      }
      if (gone.aborted || script.headerDelay === "never") {
        settle("cancelled");
        throw req.signal.reason ?? new DOMException("aborted", "AbortError");
      }
      return new Response(bodyStream(script.body ?? [], { settle, clock, signal: gone }), {
        status: script.status ?? 200,
        headers: script.headers ?? { "content-type": "application/json" },
      });
    },
  };
}

/** Resolves after `ms` virtual ms (Infinity: never), or at once when `signal` aborts. */
function waitFor(ms: number, opts: { clock: Clock; signal: AbortSignal }): Promise<void> {
  if (ms === Infinity) {
    return new Promise((resolve) => {
      if (opts.signal.aborted) return resolve();
      opts.signal.addEventListener("abort", () => resolve(), { once: true });
    });
  }
  return opts.clock.sleep(ms, opts.signal).catch(() => {});
}

/**
 * The body as server.ts sends it; the caller's abort errors it as a real fetch's body errors
 * when its connection is dropped, and a cancel from the gateway ends it.
 */
function bodyStream(
  steps: Step[],
  opts: { settle: (how: "cancelled" | "ended") => void; clock: Clock; signal: AbortSignal },
): ReadableStream<Uint8Array> {
  const { settle, clock, signal } = opts;
  let i = 0;
  let cancelled = false;
  let onAbort = () => {};
  return new ReadableStream({
    start(controller) {
      onAbort = () => {
        if (cancelled) return;
        cancelled = true;
        settle("cancelled");
        try {
          controller.error(signal.reason ?? new DOMException("aborted", "AbortError"));
        } catch { /* already closed */ }
      };
      signal.addEventListener("abort", onAbort, { once: true });
    },
    async pull(controller) {
      for (;;) {
        if (cancelled) return;
        const step = steps[i++];
        if (!step) {
          signal.removeEventListener("abort", onAbort);
          controller.close();
          settle("ended");
          return;
        }
        if ("wait" in step) await waitFor(step.wait, { clock, signal });
        else if ("until" in step) await step.until.catch(() => {});
        else if ("reset" in step) {
          signal.removeEventListener("abort", onAbort);
          controller.error(new TypeError("fake upstream reset the connection"));
          settle("ended");
          return;
        } else if ("hang" in step) {
          await waitFor(Infinity, { clock, signal });
          return;
        } else {
          controller.enqueue(typeof step.send === "string" ? encoder.encode(step.send) : step.send);
          return;
        }
      }
    },
    cancel() {
      cancelled = true;
      signal.removeEventListener("abort", onAbort);
      settle("cancelled");
    },
  });
}
