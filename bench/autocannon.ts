/**
 * autocannon, the load generator of the throughput runs: a Node process of its own on the load
 * cores, closed loop (`connections` requests in flight, each sent when the last came back).
 */
import type { NodeTools } from "./npm_tools.ts";
import { type Layout, runJob } from "./services.ts";
import type { RequestSpec } from "./targets.ts";

export interface LoadRun {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Connection errors + timeouts + non-2xx answers. */
  errors: number;
  /** Every answered request of the run, warm-up included, to divide CPU time by. */
  requests: number;
}

interface AutocannonJson {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  "2xx": number;
  latency: { p50: number; p99: number };
  warmup?: { "2xx": number; non2xx: number };
}

/** What autocannon needs of the bench: where it is, and which cores it runs on. */
export interface LoadEnv {
  tools: NodeTools;
  layout: Layout;
}

export async function autocannon(
  ctx: LoadEnv,
  opts: { request: RequestSpec; connections: number; seconds: number; warmupSeconds: number },
): Promise<LoadRun> {
  const script = ctx.tools.autocannon;
  if (!script) throw new Error("autocannon is not installed");
  const c = String(opts.connections);
  const warmup = opts.warmupSeconds > 0
    ? ["-W", "[", "-c", c, "-d", String(opts.warmupSeconds), "]"]
    : [];
  const headers = Object.entries(opts.request.headers).flatMap(([k, v]) => ["-H", `${k}=${v}`]);
  const result = await runJob({
    name: "autocannon",
    cmd: [
      ctx.tools.node,
      script,
      "-c",
      c,
      "-d",
      String(opts.seconds),
      ...warmup,
      "-m",
      "POST",
      ...headers,
      "-b",
      opts.request.body,
      "-j",
      opts.request.url,
    ],
    cpus: ctx.layout.loadCpus,
  }, {
    layout: ctx.layout,
    timeoutMs: (opts.seconds + opts.warmupSeconds) * 1000 + 30_000,
  }) as AutocannonJson;
  const ok = result["2xx"];
  return {
    rps: ok / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
    requests: ok + result.non2xx +
      (result.warmup ? result.warmup["2xx"] + result.warmup.non2xx : 0),
  };
}
