/**
 * Scenario 9: the latency one caller feels, as published gateway comparisons state it: one
 * request at a time, whole answers (the zero-delay route) and streamed ones (the `stream8` route:
 * eight deltas at once), the floor and pulsegate (and Portkey when it is installed) alternating
 * in rounds within one load job, so every percentile is compared with the floor's taken in the
 * same minutes. Added = the target's percentile minus the floor's, same kind of answer.
 *
 * Then whole answers at 64 connections (autocannon, zero-delay route), the same targets
 * alternating in repetitions: requests/s and CPU per request, as ratios to the floor's.
 */
import { autocannon } from "../autocannon.ts";
import { type BenchContext, loadJob, running } from "../context.ts";
import type { LatencyJob, LatencyJobResult } from "../load/latency_rounds.ts";
import type { OneCallerResult, OneCallerRow, Throughput64Row } from "../results.ts";
import { round, roundSummary, summarize } from "../stats.ts";
import { requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

const TARGETS: TargetId[] = ["floor", "pulsegate", "portkey"];
export const KINDS = ["whole", "streamed"] as const;
export type AnswerKind = typeof KINDS[number];
const MODE: Record<AnswerKind, string> = { whole: "zero", streamed: "stream8" };

const unitId = (target: TargetId, kind: AnswerKind) => `${target}:${kind}`;

export async function oneCaller(ctx: BenchContext): Promise<OneCallerResult> {
  const p = ctx.profile.oneCaller;
  const targets = running(ctx, TARGETS);
  const skipped = ctx.stack.skipped.filter((s) => TARGETS.includes(s.target));
  for (const s of skipped) ctx.log(`one caller: ${s.target} skipped: ${s.reason}`);
  const job: LatencyJob = {
    targets: targets.flatMap((id) =>
      KINDS.map((kind) => ({
        id: unitId(id, kind),
        stream: kind === "streamed",
        request: requestFor(id, {
          endpoints: ctx.stack.endpoints,
          mode: MODE[kind],
          stream: kind === "streamed",
        }),
      }))
    ),
    rounds: p.rounds,
    perRound: p.perRound,
    warmup: p.warmup,
    budgetMs: p.budgetMs,
  };
  ctx.log(
    `one caller: ${targets.join(", ")}, whole and streamed, ${p.rounds} rounds of ${p.perRound}`,
  );
  const out = await loadJob<LatencyJobResult>(ctx, {
    script: "latency_rounds.ts",
    job,
    timeoutMs: p.budgetMs + 120_000,
  });
  const rows: OneCallerRow[] = [];
  for (const kind of KINDS) {
    const floor = summarize(out.samples[unitId("floor", kind)] ?? []);
    for (const target of targets) {
      const id = unitId(target, kind);
      const s = summarize(out.samples[id] ?? []);
      const first = out.firstChunk[id];
      const row: OneCallerRow = {
        target,
        label: TARGET_LABELS[target],
        kind,
        latencyMs: roundSummary(s),
        firstChunkMs: first?.length ? roundSummary(summarize(first)) : null,
        addedMs: target === "floor" ? null : {
          p50: round(s.p50 - floor.p50),
          p90: round(s.p90 - floor.p90),
          p99: round(s.p99 - floor.p99),
          max: round(s.max - floor.max),
        },
        errors: out.errorCount[id] ?? 0,
        errorExamples: out.errorExamples[id] ?? [],
      };
      rows.push(row);
      if (row.addedMs) {
        const a = row.addedMs;
        ctx.log(
          `one caller ${kind}: ${target} adds p50 ${a.p50} / p90 ${a.p90} / p99 ${a.p99} / ` +
            `max ${a.max} ms over the floor (${s.count} requests, floor p99 ` +
            `${round(floor.p99)} ms, ${row.errors} errors)`,
        );
      }
    }
  }
  return {
    requestsPerTarget: out.rounds * p.perRound,
    rounds: out.rounds,
    rows,
    throughput64: await throughputAt(ctx, targets),
    skipped,
  };
}

/** Whole answers at `p.connections`, targets alternating over `p.reps` repetitions. */
async function throughputAt(
  ctx: BenchContext,
  targets: TargetId[],
): Promise<OneCallerResult["throughput64"]> {
  const p = ctx.profile.oneCaller;
  const rows = new Map<TargetId, Throughput64Row>(targets.map((t) => [t, {
    target: t,
    label: TARGET_LABELS[t],
    rps: [],
    cpuUsPerRequest: [],
    p99Ms: [],
    errors: 0,
  }]));
  for (let rep = 0; rep < p.reps; rep++) {
    const order = targets.map((_, i) => targets[(i + rep) % targets.length]!);
    for (const target of order) {
      const proxy = ctx.stack.proxies[target]!;
      const before = await proxy.cpuMs();
      const run = await autocannon(ctx, {
        request: requestFor(target, { endpoints: ctx.stack.endpoints, mode: "zero" }),
        connections: p.connections,
        seconds: p.seconds,
        warmupSeconds: p.warmupSeconds,
      });
      const cpuUs = ((await proxy.cpuMs()) - before) * 1000 / Math.max(1, run.requests);
      const row = rows.get(target)!;
      row.rps.push(round(run.rps, 1));
      row.cpuUsPerRequest.push(round(cpuUs, 1));
      row.p99Ms.push(run.p99Ms);
      row.errors += run.errors;
      ctx.log(
        `one caller, ${p.connections} connections, rep ${rep + 1} ${target}: ` +
          `${Math.round(run.rps)} req/s, ${round(cpuUs, 1)} µs CPU/req, p99 ${run.p99Ms} ms`,
      );
    }
  }
  return {
    connections: p.connections,
    seconds: p.seconds,
    reps: p.reps,
    rows: [...rows.values()],
  };
}
