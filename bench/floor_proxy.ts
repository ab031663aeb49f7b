/**
 * The floor: the least a Deno proxy can do. It forwards the request to the same path on the
 * upstream and returns the answer as it streams, nothing else: no parsing, no history, no
 * failover. Whatever pulsegate costs beyond this is pulsegate's own.
 *
 * With `BENCH_FLOOR_MODE=js` it is the "JS relay" floor: the same, except that it reads the
 * upstream's body in JavaScript and hands Deno.serve a stream of its own that enqueues each
 * chunk. That is the least any relay that looks at every chunk pays on this runtime: Deno.serve
 * then pumps a JS stream chunk by chunk, where the plain floor hands it the fetch body's
 * resource, which it pipes in Rust.
 *
 * `BENCH_UPSTREAM=http://127.0.0.1:PORT [BENCH_FLOOR_MODE=js] deno run --allow-net --allow-env
 * bench/floor_proxy.ts` prints `{"url": ...}` on stdout.
 */

export type FloorMode = "pass" | "js";

/** Each upstream chunk read by a default reader and enqueued into a pull stream of its own. */
function jsRelay(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 1 });
}

export function floorHandler(
  upstream: string,
  mode: FloorMode = "pass",
): (req: Request) => Promise<Response> {
  return async (req) => {
    const url = new URL(req.url);
    const res = await fetch(upstream + url.pathname + url.search, {
      method: req.method,
      headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
      body: req.body,
      signal: req.signal,
    });
    const body = mode === "js" && res.body ? jsRelay(res.body) : res.body;
    return new Response(body, { status: res.status, headers: res.headers });
  };
}

if (import.meta.main) {
  const upstream = Deno.env.get("BENCH_UPSTREAM");
  if (!upstream) throw new Error("BENCH_UPSTREAM must name the upstream origin");
  const mode = Deno.env.get("BENCH_FLOOR_MODE") === "js" ? "js" : "pass";
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    floorHandler(upstream, mode),
  );
  const ready: Record<string, string> = { url: `http://127.0.0.1:${server.addr.port}` };
  // `BENCH_FLOOR_CONTROL=1`: a heap snapshot at `/heap/snapshot?path=F`, as bench/gateway_entry.ts
  // has, for bench/held_heap.ts to compare a held stream's heap with the floors'.
  if (Deno.env.get("BENCH_FLOOR_CONTROL") === "1") {
    const { SelfProfiler } = await import("./self_profiler.ts");
    const profiler = new SelfProfiler();
    const control = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
      const file = new URL(req.url).searchParams.get("path");
      if (!file) return new Response("path?", { status: 400 });
      await profiler.heapSnapshot(file);
      return Response.json({ ok: true });
    });
    ready.control = `http://127.0.0.1:${control.addr.port}`;
  }
  console.log(JSON.stringify(ready));
}
