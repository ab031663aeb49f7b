/**
 * The floor: the least a Deno proxy can do. It forwards the request to the same path on the
 * upstream and returns the answer as it streams, nothing else: no parsing, no history, no
 * failover. Whatever pulsegate costs beyond this is pulsegate's own.
 *
 * `BENCH_UPSTREAM=http://127.0.0.1:PORT deno run --allow-net --allow-env bench/floor_proxy.ts`
 * prints `{"url": ...}` on stdout.
 */

export function floorHandler(upstream: string): (req: Request) => Promise<Response> {
  return async (req) => {
    const url = new URL(req.url);
    const res = await fetch(upstream + url.pathname + url.search, {
      method: req.method,
      headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
      body: req.body,
      signal: req.signal,
    });
    return new Response(res.body, { status: res.status, headers: res.headers });
  };
}

if (import.meta.main) {
  const upstream = Deno.env.get("BENCH_UPSTREAM");
  if (!upstream) throw new Error("BENCH_UPSTREAM must name the upstream origin");
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    floorHandler(upstream),
  );
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.addr.port}` }));
}
