/**
 * pulsegate as the bench runs it: its own process, started the way `main.ts` starts it (settings
 * from the environment), plus what only the gateway's own process can measure, behind a second,
 * bench-only port:
 *
 * - an event-loop probe (a 5 ms interval timer whose lateness is a stall, run only between
 *   `/probe/start` and `/probe/stop`): how long the serving thread could run nothing else;
 * - the time of every history batch, as the writer reports it (for a local file the batch runs on
 *   the writer's worker thread, so it is no longer time the serving thread is blocked);
 * - the process's CPU split by thread (serving thread, the history worker, all), from /proc;
 * - `/stats?gc=1`: a full GC first, so the memory it reports is what is alive, not garbage not yet
 *   collected; it needs `--v8-flags=--expose-gc` (answers 409 without it);
 * - a CPU profile of the serving thread between `/profile/start?us=N` and `/profile/stop`
 *   (bench/self_profiler.ts), and a heap snapshot to a file at `/heap/snapshot?path=F`;
 * - the serving thread's allocations between `/alloc/start?bytes=N` and `/alloc/stop?top=K`
 *   (V8's sampling heap profiler, one sample per N bytes, collected objects included), answered
 *   summed (bench/alloc_profile.ts): estimated objects and bytes, and the top K sites;
 * - `BENCH_HISTORY=off`: the writer's `writeRequest`/`writeAttempt` become no-ops on this
 *   instance, so every row is still built but none is queued or written. That is the cost of
 *   history the bench can isolate without a gateway option for it.
 *
 * Prints `{"url": ..., "control": ...}` on stdout once both listen.
 */
import { readSettings } from "../gateway/start/settings.ts";
import { startGateway } from "../gateway/start/start_gateway.ts";
import { LoopProbe } from "./loop_probe.ts";
import { threadCpu } from "./thread_cpu.ts";
import { SelfProfiler } from "./self_profiler.ts";
import { summarizeAllocations } from "./alloc_profile.ts";

const env = (name: string) => Deno.env.get(name);
// metricsOpen: the bench reads `pulsegate_inflight_requests` from /metrics like a scraper would.
const batches: number[] = [];
const gateway = await startGateway({
  settings: readSettings(env),
  env,
  quiet: true,
  metricsOpen: true,
  onHistoryBatch: ({ ms }) => batches.push(ms),
});

if (env("BENCH_HISTORY") === "off") {
  gateway.writer.writeRequest = () => {};
  gateway.writer.writeAttempt = () => {};
}

// Off until asked for: its 200 wake-ups a second would count in the CPU per delta and per
// stream that other scenarios measure.
const probeMs = Number(env("BENCH_PROBE_MS") ?? "0");
const probe = probeMs > 0 ? new LoopProbe(probeMs, { running: false }) : null;

function memory() {
  const m = Deno.memoryUsage();
  return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, externalBytes: m.external };
}

/** V8's `gc()`, present only under `--v8-flags=--expose-gc`. */
const fullGc = (globalThis as { gc?: () => void }).gc;

const profiler = new SelfProfiler();
let allocInterval = 8;

const control = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
  const path = new URL(req.url).pathname;
  if (path === "/profile/start") {
    await profiler.start(Number(new URL(req.url).searchParams.get("us") ?? "200"));
    return Response.json({ ok: true });
  }
  if (path === "/profile/stop") return Response.json(await profiler.stop());
  if (path === "/alloc/start") {
    allocInterval = Number(new URL(req.url).searchParams.get("bytes") ?? "8");
    await profiler.startAllocations(allocInterval);
    return Response.json({ ok: true });
  }
  if (path === "/alloc/stop") {
    const { profile } = await profiler.stopAllocations();
    const top = Number(new URL(req.url).searchParams.get("top") ?? "40");
    return Response.json(summarizeAllocations(profile, { interval: allocInterval, top }));
  }
  if (path === "/heap/snapshot") {
    const file = new URL(req.url).searchParams.get("path");
    if (!file) return new Response("path?", { status: 400 });
    await profiler.heapSnapshot(file);
    return Response.json({ ok: true });
  }
  if (path === "/probe/start" || path === "/probe/stop") {
    if (path === "/probe/start") probe?.start();
    else probe?.stop();
    return Response.json({ ok: true });
  }
  if (path === "/reset") {
    probe?.reset();
    batches.length = 0;
    return Response.json({ ok: true });
  }
  if (path === "/stats") {
    if (new URL(req.url).searchParams.get("gc") === "1") {
      if (!fullGc) return new Response("start with --v8-flags=--expose-gc", { status: 409 });
      // Twice: what the first frees can hold the last references to more (finalizers, weak maps).
      fullGc();
      fullGc();
    }
    return Response.json({
      inflight: gateway.metrics.inflight,
      ...memory(),
      writer: gateway.writer.stats(),
      probe: probe?.summary() ?? null,
      batchesMs: batches,
      threads: await threadCpu(),
    });
  }
  return new Response("not found", { status: 404 });
});

console.log(JSON.stringify({ url: gateway.url, control: `http://127.0.0.1:${control.addr.port}` }));

const stop = async () => {
  probe?.stop();
  await control.shutdown();
  await gateway.shutdown();
  Deno.exit(0);
};
Deno.addSignalListener("SIGTERM", stop);
Deno.addSignalListener("SIGINT", stop);
