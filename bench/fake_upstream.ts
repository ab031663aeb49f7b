/**
 * The bench's fake Chat Completions upstream: as cheap as a server can be, so what the bench
 * measures is the proxy in front of it. One process serves every mode; the mode is the first
 * path segment, so each gateway route can point at its own `base_url`:
 *
 * - `/zero/v1/chat/completions`: a ~200-byte answer at once;
 * - `/delay20/v1/chat/completions`: the same answer after 20 ms;
 * - `/stream64/v1/chat/completions`: 64 content deltas 20 ms apart, then finish and `[DONE]`;
 * - `/stream8/v1/chat/completions`: 8 content deltas at once, then finish and `[DONE]`: a
 *   streamed answer as short as a whole one, for timing one streamed request after another;
 * - `/held-<maxSilenceMs>-<frames>-<intervalMs>/v1/chat/completions`: headers at once, then
 *   silence until `POST /_release` (or `maxSilenceMs`), then `frames` deltas `intervalMs` apart.
 *
 * Every streamed delta's content is the fake's send time (wall-clock ms, sub-ms precision), so a
 * client can tell the delay and the gap the proxy added from what the fake meant.
 *
 * Run alone: `deno run --allow-net bench/fake_upstream.ts` prints `{"url": ...}` on stdout.
 */

const encoder = new TextEncoder();

export const WHOLE_ANSWER = encoder.encode(JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 0,
  model: "m",
  choices: [{
    index: 0,
    message: { role: "assistant", content: "pong from the bench fake" },
    finish_reason: "stop",
  }],
  usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
}));

export const STREAM_DELTAS = 64;
export const STREAM_GAP_MS = 20;
/** Deltas of the `stream8` mode, sent back to back. */
export const BURST_DELTAS = 8;
const DELAY_MS = 20;

const JSON_HEADERS = { "content-type": "application/json" };
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

/** One SSE chunk whose content is the send time, stamped as late as possible. */
function stampedDelta(first: boolean): Uint8Array {
  const delta = first ? { role: "assistant", content: stamp() } : { content: stamp() };
  return sse({ choices: [{ index: 0, delta, finish_reason: null }] });
}

/** Wall-clock ms with sub-ms precision: the client, another process, compares its own. */
function stamp(): string {
  return (performance.timeOrigin + performance.now()).toFixed(3);
}

function sse(chunk: Record<string, unknown>): Uint8Array {
  const body = { id: "chatcmpl-bench", object: "chat.completion.chunk", created: 0, model: "m" };
  return encoder.encode(`data: ${JSON.stringify({ ...body, ...chunk })}\n\n`);
}

const FINISH = sse({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
const DONE = encoder.encode("data: [DONE]\n\n");

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Streams `count` stamped deltas `gapMs` apart; stops early when the reader went away. */
function deltaStream(
  count: number,
  opts: { gapMs: number; before?: (signal: AbortSignal) => Promise<void> },
): ReadableStream<Uint8Array> {
  const gone = new AbortController();
  return new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        await opts.before?.(gone.signal);
        for (let i = 0; i < count && !gone.signal.aborted; i++) {
          // No timer at all between back-to-back deltas: even a 0 ms one waits for a loop turn.
          if (i > 0 && opts.gapMs > 0) await sleep(opts.gapMs);
          if (gone.signal.aborted) return;
          controller.enqueue(stampedDelta(i === 0));
        }
        if (gone.signal.aborted) return;
        controller.enqueue(FINISH);
        controller.enqueue(DONE);
        controller.close();
      } catch {
        // The reader left while we waited: nothing to send to.
      }
    },
    cancel() {
      gone.abort();
    },
  });
}

/** Streams waiting for `POST /_release`; each one keeps its own bounded timer too. */
class HeldStreams {
  #waiting = new Set<() => void>();

  get size(): number {
    return this.#waiting.size;
  }

  /** Resolves on release or after `maxMs`, whichever is first; then a random phase offset. */
  wait(opts: { maxMs: number; phaseMs: number; signal: AbortSignal }): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiting.delete(done);
        opts.signal.removeEventListener("abort", done);
        // Spread the first deltas over one interval so a release is not one burst of N frames.
        setTimeout(resolve, Math.random() * opts.phaseMs);
      };
      const timer = setTimeout(done, opts.maxMs);
      opts.signal.addEventListener("abort", done, { once: true });
      this.#waiting.add(done);
    });
  }

  release(): number {
    const all = [...this.#waiting];
    for (const done of all) done();
    return all.length;
  }
}

const HELD_MODE = /^held-(\d+)-(\d+)-(\d+)$/;

export function fakeHandler(): (req: Request) => Promise<Response> {
  const held = new HeldStreams();
  return async (req) => {
    const url = new URL(req.url);
    if (url.pathname === "/_release") {
      return Response.json({ released: held.release() });
    }
    if (url.pathname === "/_held") return Response.json({ held: held.size });
    // Read the body, as a real upstream would, so the connection stays reusable.
    await req.arrayBuffer();
    const mode = url.pathname.split("/")[1] ?? "";
    if (mode === "zero") return new Response(WHOLE_ANSWER, { headers: JSON_HEADERS });
    if (mode === "delay20") {
      await sleep(DELAY_MS);
      return new Response(WHOLE_ANSWER, { headers: JSON_HEADERS });
    }
    if (mode === "stream64") {
      return new Response(deltaStream(STREAM_DELTAS, { gapMs: STREAM_GAP_MS }), {
        headers: SSE_HEADERS,
      });
    }
    if (mode === "stream8") {
      return new Response(deltaStream(BURST_DELTAS, { gapMs: 0 }), { headers: SSE_HEADERS });
    }
    const heldMode = HELD_MODE.exec(mode);
    if (heldMode) {
      const [maxMs, frames, gapMs] = heldMode.slice(1).map(Number) as [number, number, number];
      const body = deltaStream(frames, {
        gapMs,
        before: (signal) => held.wait({ maxMs, phaseMs: gapMs, signal }),
      });
      return new Response(body, { headers: SSE_HEADERS });
    }
    return new Response(`unknown fake mode '${mode}'`, { status: 404 });
  };
}

if (import.meta.main) {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: Number(Deno.env.get("BENCH_PORT") ?? "0"), onListen() {} },
    fakeHandler(),
  );
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.addr.port}` }));
}
