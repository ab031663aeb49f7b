/**
 * A scripted fake upstream: a real HTTP server on 127.0.0.1 whose every
 * answer is described by a Script (status, headers, and a body as a list of
 * steps: bytes, waits, or hang-until-cancelled). Formats add helpers that
 * build Scripts in their own wire format; this file knows none of them.
 */

export type Step =
  | { send: string | Uint8Array }
  | { wait: number } // real milliseconds
  | { hang: true } // keep the connection open, send nothing, until cancelled
  | { reset: true } // break the connection: the caller's read fails
  | { until: Promise<unknown> }; // send nothing until it settles: the test decides when

export interface Script {
  status?: number;
  headers?: Record<string, string>;
  /** Real ms before headers go out; "never" keeps the caller waiting forever. */
  headerDelay?: number | "never";
  body?: Step[];
}

export interface Call {
  path: string;
  method: string;
  headers: Headers;
  body: string;
  json: unknown;
  /** Resolves when the gateway dropped the connection or the body ended. */
  closed: Promise<"cancelled" | "ended">;
}

export type Handler = (call: Call) => Script | Promise<Script>;

/** `await using up = startFakeUpstream()` closes it when the test's scope ends. */
export interface FakeUpstream extends AsyncDisposable {
  url: string;
  calls: Call[];
  /** Answers the next calls in order; after the queue, `fallback` answers. */
  enqueue(...scripts: Script[]): void;
  setHandler(handler: Handler): void;
  /** Requests whose response body has neither ended nor been cancelled (nor headers refused). */
  readonly openConnections: number;
  close(): Promise<void>;
}

const encoder = new TextEncoder();

export function startFakeUpstream(opts: { fallback?: Handler } = {}): FakeUpstream {
  const calls: Call[] = [];
  const queue: Script[] = [];
  const closing = new AbortController();
  const count = { open: 0 };
  let handler: Handler = opts.fallback ?? (() => ({ status: 500, body: [{ send: "no script" }] }));
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const { call, settle } = await openCall(req, count);
    calls.push(call);
    const script = queue.shift() ?? (await handler(call));
    if (script.headerDelay === "never") {
      // Until the caller leaves, or the fake closes: a connection the caller failed to
      // drop must not keep `close()` waiting for ever (and the caller's test with it).
      const gone = AbortSignal.any([req.signal, closing.signal]);
      if (!gone.aborted) {
        await new Promise<void>((resolve) => gone.addEventListener("abort", () => resolve()));
      }
      settle(req.signal.aborted ? "cancelled" : "ended");
      return new Response(null, { status: 499 });
    }
    if (script.headerDelay) await sleep(script.headerDelay, req.signal);
    if (req.signal.aborted) {
      // Gone while its headers were held back: no body will ever be read, or cancelled.
      settle("cancelled");
      return new Response(null, { status: 499 });
    }
    return new Response(bodyStream(script.body ?? [], { settle, closing: closing.signal }), {
      status: script.status ?? 200,
      headers: script.headers ?? { "content-type": "application/json" },
    });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    calls,
    enqueue: (...scripts) => queue.push(...scripts),
    setHandler: (h) => (handler = h),
    get openConnections() {
      return count.open;
    },
    close,
    [Symbol.asyncDispose]: close,
  };

  async function close(): Promise<void> {
    closing.abort();
    await server.shutdown().catch(() => {});
  }
}

function bodyStream(
  steps: Step[],
  opts: { settle: (how: "cancelled" | "ended") => void; closing: AbortSignal },
): ReadableStream<Uint8Array> {
  const { settle, closing } = opts;
  let i = 0;
  let cancelled = false;
  return new ReadableStream({
    async pull(controller) {
      for (;;) {
        const step = steps[i++];
        if (!step) {
          controller.close();
          settle("ended");
          return;
        }
        if ("wait" in step) await sleep(step.wait);
        else if ("until" in step) await step.until.catch(() => {});
        else if ("reset" in step) {
          controller.error(new Error("fake upstream reset the connection"));
          settle("ended");
          return;
        } else if ("hang" in step) {
          // Until the caller drops it, or the fake closes (see headerDelay "never").
          while (!cancelled && !closing.aborted) await sleep(20);
          if (!cancelled) {
            controller.close();
            settle("ended");
          }
          return;
        } else {
          controller.enqueue(typeof step.send === "string" ? encoder.encode(step.send) : step.send);
          return;
        }
        if (cancelled) return;
      }
    },
    cancel() {
      cancelled = true;
      settle("cancelled");
    },
  });
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const id = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(id);
      resolve();
    });
  });
}

/** A body of SSE blocks sent `gap` ms apart. */
export function sseSteps(blocks: string[], opts: { gap?: number } = {}): Step[] {
  return blocks.flatMap((
    b,
    i,
  ) => (i && opts.gap ? [{ wait: opts.gap }, { send: b }] : [{ send: b }]));
}

/**
 * A call as a fake upstream sees it, counted in `count.open` until `settle` ends it (the body
 * ended, or the caller went away); `call.closed` says which. Shared by the socket fakes here and
 * the in-process ones (in_process.ts).
 */
export async function openCall(
  req: Request,
  count: { open: number },
): Promise<{ call: Call; settle: (how: "cancelled" | "ended") => void }> {
  const text = await req.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch { /* not JSON: kept as text */ }
  let resolve!: (how: "cancelled" | "ended") => void;
  const closed = new Promise<"cancelled" | "ended">((r) => (resolve = r));
  count.open++;
  let settled = false;
  const settle = (how: "cancelled" | "ended") => {
    if (settled) return;
    settled = true;
    count.open--;
    resolve(how);
  };
  const target = new URL(req.url);
  const call: Call = {
    path: target.pathname + target.search,
    method: req.method,
    headers: req.headers,
    body: text,
    json,
    closed,
  };
  return { call, settle };
}
