/**
 * Scenario 9's measure for bench/cpu_ab.ts: `requests` requests one at a time per target, whole
 * (zero-delay route) and streamed (`stream8`), every target and kind alternating in rounds within
 * one load job (bench/load/latency_rounds.ts) on the load cores. Answers each unit's summary,
 * keyed `name:whole` and `name:streamed`.
 */
import type { LatencyJob, LatencyJobResult } from "./load/latency_rounds.ts";
import { type Layout, runJob } from "./services.ts";
import { BENCH_DIR, REPO_ROOT } from "./stack.ts";
import { summarize, type Summary } from "./stats.ts";
import { requestFor } from "./targets.ts";

export interface LatencyTarget {
  name: string;
  url: string;
  /** A pulsegate (routes by name), else a floor (the fake's own paths). */
  gateway: boolean;
}

export async function oneCallerRound(
  env: { layout: Layout; fake: string },
  opts: { targets: LatencyTarget[]; requests: number; perRound: number },
): Promise<Record<string, Summary & { errors: number }>> {
  const perRound = Math.min(opts.perRound, opts.requests);
  const job: LatencyJob = {
    targets: opts.targets.flatMap((t) => {
      const id = t.gateway ? "pulsegate" : "floor";
      const endpoints = { fake: env.fake, [id]: t.url };
      return [
        { id: `${t.name}:whole`, request: requestFor(id, { endpoints, mode: "zero" }) },
        {
          id: `${t.name}:streamed`,
          stream: true,
          request: requestFor(id, { endpoints, mode: "stream8", stream: true }),
        },
      ];
    }),
    rounds: Math.max(1, Math.round(opts.requests / perRound)),
    perRound,
    warmup: Math.min(300, perRound),
    budgetMs: 600_000,
  };
  const out = await runJob({
    name: "one_caller",
    cmd: [
      Deno.execPath(),
      "run",
      "-A",
      `${BENCH_DIR}load/latency_rounds.ts`,
      JSON.stringify(job),
    ],
    cwd: REPO_ROOT,
    cpus: env.layout.loadCpus,
  }, { layout: env.layout, timeoutMs: 660_000 }) as LatencyJobResult;
  return Object.fromEntries(
    job.targets.map((t) => [
      t.id,
      { ...summarize(out.samples[t.id] ?? []), errors: out.errorCount[t.id] ?? 0 },
    ]),
  );
}
