/**
 * Scenario 6: CPU per streamed delta and per whole answer, the floor, its JS relay variant (what
 * any relay that reads each chunk in JavaScript pays) and pulsegate, in alternating repetitions
 * (the order rotates each time). CPU time, not wall-clock, so neighbours on the
 * machine disturb it less; each figure is reported with its spread over the repetitions, so a
 * 10 % change can be told from the noise. bench/cpu_ab.ts runs the same measure between two
 * checkouts.
 */
import { autocannon, type LoadEnv } from "../autocannon.ts";
import type { BenchContext } from "../context.ts";
import { STREAM_DELTAS } from "../fake_upstream.ts";
import type { StreamTargetResult } from "../load/stream_probe.ts";
import type { CpuCostResult } from "../results.ts";
import { runJob, type Service } from "../services.ts";
import { BENCH_DIR, REPO_ROOT } from "../stack.ts";
import { round } from "../stats.ts";
import { threadCpu } from "../thread_cpu.ts";
import { requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

export interface CpuCostLoad {
  /** Streams of STREAM_DELTAS deltas run at once, `rounds` times per repetition. */
  streams: number;
  rounds: number;
  /** Whole answers (zero-delay route): autocannon at `concurrency` for `seconds`. */
  concurrency: number;
  seconds: number;
}

/** One repetition's figures on one proxy. */
export interface CpuMeasure {
  usPerDelta: number;
  usPerRequest: number;
  rps: number;
  rssMiB: number;
  errors: number;
  /**
   * Of the whole answers' CPU per request, the serving (main) thread's and the `Worker` threads'
   * (pulsegate's history writer), from /proc ticks: 10 ms each, so read them over seconds.
   */
  threads: { mainUs: number; workerUs: number } | null;
}

/**
 * One repetition on one proxy: CPU µs per delta and per whole answer, and its RSS after. With
 * `load.streams` 0 the streamed part is skipped (`usPerDelta` NaN).
 */
export async function measureCpu(
  env: LoadEnv & { fake: string },
  opts: { service: Service; target: Exclude<TargetId, "direct">; load: CpuCostLoad },
): Promise<CpuMeasure> {
  const { service, target, load } = opts;
  const endpoints = { fake: env.fake, [target]: service.url };
  const streamed = load.streams > 0 ? await cpuPerDelta(env, opts) : { us: NaN, errors: 0 };
  const before = await service.cpuMs();
  const threadsBefore = await threadCpu(service.pid);
  const run = await autocannon(env, {
    request: requestFor(target, { endpoints, mode: "zero" }),
    connections: load.concurrency,
    seconds: load.seconds,
    warmupSeconds: 0,
  });
  const usPerRequest = ((await service.cpuMs()) - before) * 1000 / Math.max(1, run.requests);
  const threadsAfter = await threadCpu(service.pid);
  const perRequest = (ms: number) => ms * 1000 / Math.max(1, run.requests);
  return {
    usPerDelta: streamed.us,
    usPerRequest,
    rps: run.rps,
    rssMiB: (await service.rssBytes()) / 2 ** 20,
    errors: streamed.errors + run.errors,
    threads: threadsBefore && threadsAfter
      ? {
        mainUs: perRequest(threadsAfter.mainMs - threadsBefore.mainMs),
        workerUs: perRequest(threadsAfter.workerMs - threadsBefore.workerMs),
      }
      : null,
  };
}

/** CPU µs per delta of `load.streams` streams at once, `load.rounds` times. */
async function cpuPerDelta(
  env: LoadEnv & { fake: string },
  opts: { service: Service; target: Exclude<TargetId, "direct">; load: CpuCostLoad },
): Promise<{ us: number; errors: number }> {
  const { service, target, load } = opts;
  const endpoints = { fake: env.fake, [target]: service.url };
  const streamRequest = requestFor(target, { endpoints, mode: "stream64", stream: true });
  const before = await service.cpuMs();
  const out = await runJob({
    name: "stream_probe",
    cmd: [
      Deno.execPath(),
      "run",
      "-A",
      `${BENCH_DIR}load/stream_probe.ts`,
      JSON.stringify({
        targets: [{ id: target, request: streamRequest }],
        rounds: load.rounds,
        concurrency: load.streams,
        expectDeltas: STREAM_DELTAS,
        budgetMs: 120_000,
      }),
    ],
    cwd: REPO_ROOT,
    cpus: env.layout.loadCpus,
  }, { layout: env.layout, timeoutMs: 180_000 }) as Record<string, StreamTargetResult>;
  const streamed = out[target]!;
  const us = ((await service.cpuMs()) - before) * 1000 / Math.max(1, streamed.delayMs.length);
  return { us, errors: streamed.errors.length };
}

export async function cpuCost(ctx: BenchContext): Promise<CpuCostResult> {
  const p = ctx.profile.cpuCost;
  const targets = (["floor", "floor_js", "pulsegate"] as const).filter((t) => ctx.stack.proxies[t]);
  const rows = new Map<TargetId, CpuCostResult["rows"][number]>();
  for (const t of targets) {
    rows.set(t, {
      target: t,
      label: TARGET_LABELS[t],
      usPerDelta: [],
      usPerRequest: [],
      rssMiB: [],
      errors: 0,
    });
  }
  ctx.log(`cpu cost: ${targets.join(", ")}, ${p.reps} alternating repetitions`);
  for (let rep = 0; rep < p.reps; rep++) {
    const order = targets.map((_, i) => targets[(i + rep) % targets.length]!);
    for (const target of order) {
      const m = await measureCpu({ ...ctx, fake: ctx.stack.fake.url }, {
        service: ctx.stack.proxies[target]!,
        target,
        load: p,
      });
      const row = rows.get(target)!;
      row.usPerDelta.push(round(m.usPerDelta, 1));
      row.usPerRequest.push(round(m.usPerRequest, 1));
      row.rssMiB.push(round(m.rssMiB, 1));
      row.errors += m.errors;
    }
  }
  return { reps: p.reps, load: { ...p }, rows: [...rows.values()] };
}

/** The median of a repetition's figures, and its spread (max − min) as a share of it. */
export function spreadOf(values: number[]): { median: number; min: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0] ?? NaN, max: sorted.at(-1) ?? NaN };
}
