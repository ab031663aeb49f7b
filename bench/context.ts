import type { NodeTools } from "./npm_tools.ts";
import type { Profile } from "./profile.ts";
import { type Layout, runJob } from "./services.ts";
import { BENCH_DIR, REPO_ROOT, type Stack } from "./stack.ts";
import type { TargetId } from "./targets.ts";
import type { ThreadCpu } from "./thread_cpu.ts";

/** What every scenario gets: the profile, the processes, where to put files, a progress log. */
export interface BenchContext {
  profile: Profile;
  layout: Layout;
  tools: NodeTools;
  stack: Stack;
  workDir: string;
  log(message: string): void;
}

/** Runs one of bench/load/*.ts as a process of its own on the load cores. */
export async function loadJob<T>(
  ctx: BenchContext,
  opts: { script: string; job: unknown; timeoutMs: number },
): Promise<T> {
  return await runJob({
    name: opts.script.replace(/\W+/g, "_"),
    cmd: [
      Deno.execPath(),
      "run",
      "-A",
      `${BENCH_DIR}load/${opts.script}`,
      JSON.stringify(opts.job),
    ],
    cwd: REPO_ROOT,
    cpus: ctx.layout.loadCpus,
  }, { layout: ctx.layout, timeoutMs: opts.timeoutMs }) as T;
}

/** The targets of a scenario that are running, in the order given. */
export function running(ctx: BenchContext, wanted: TargetId[]): TargetId[] {
  return wanted.filter((t) => t === "direct" || ctx.stack.endpoints[t] !== undefined);
}

/** Reads the bench-only stats of a pulsegate process (see gateway_entry.ts). */
export async function gatewayStats(control: string): Promise<GatewayStats> {
  const res = await fetch(`${control}/stats`);
  return await res.json() as GatewayStats;
}

/** Runs (or stops) the event-loop probe of every pulsegate process of the stack. */
export async function setProbes(ctx: BenchContext, on: boolean): Promise<void> {
  for (const control of Object.values(ctx.stack.controls)) {
    const res = await fetch(`${control}/probe/${on ? "start" : "stop"}`, { method: "POST" });
    await res.body?.cancel();
  }
}

export async function resetGatewayStats(control: string): Promise<void> {
  await (await fetch(`${control}/reset`, { method: "POST" })).body?.cancel();
}

export interface GatewayStats {
  inflight: number;
  rssBytes: number;
  heapUsedBytes: number;
  /** Memory V8 knows of outside its heap: ArrayBuffer backing stores (read buffers). */
  externalBytes: number;
  writer: { pending: number; written: number; dropped: number; failures: number };
  probe: { maxStallMs: number; p99StallMs: number; over10ms: number; ticks: number } | null;
  batchesMs: number[];
  /** The process's CPU by thread (serving, worker, all) so far; null off Linux. */
  threads: ThreadCpu | null;
}
