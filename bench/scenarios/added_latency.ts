/**
 * Scenario 1: what each proxy adds to one request at a time. Zero-delay fake, ~200-byte answer;
 * the added latency of a target is its p50 (p99) minus direct's p50 (p99), taken in one job that
 * alternates targets in rounds.
 */
import { type BenchContext, loadJob, running } from "../context.ts";
import type { LatencyJob, LatencyJobResult } from "../load/latency_rounds.ts";
import type { AddedLatencyResult, LatencyRow } from "../results.ts";
import { round, roundSummary, summarize } from "../stats.ts";
import { requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

const TARGETS: TargetId[] = ["direct", "floor", "pulsegate", "pulsegate_no_history", "portkey"];

export async function addedLatency(ctx: BenchContext): Promise<AddedLatencyResult> {
  const p = ctx.profile.latency;
  const targets = running(ctx, TARGETS);
  const job: LatencyJob = {
    targets: targets.map((id) => ({
      id,
      request: requestFor(id, { endpoints: ctx.stack.endpoints, mode: "zero" }),
    })),
    rounds: p.rounds,
    perRound: p.perRound,
    warmup: p.warmup,
    budgetMs: p.budgetMs,
  };
  ctx.log(`added latency: ${targets.join(", ")}, ${p.rounds} rounds of ${p.perRound}`);
  const out = await loadJob<LatencyJobResult>(ctx, {
    script: "latency_rounds.ts",
    job,
    timeoutMs: p.budgetMs + 60_000,
  });
  const direct = summarize(out.samples.direct ?? []);
  const rows: LatencyRow[] = targets.map((id) => {
    const s = summarize(out.samples[id] ?? []);
    return {
      target: id,
      label: TARGET_LABELS[id],
      latencyMs: roundSummary(s),
      addedMs: id === "direct"
        ? null
        : { p50: round(s.p50 - direct.p50), p99: round(s.p99 - direct.p99) },
      errors: out.errorCount[id] ?? 0,
      errorExamples: out.errorExamples[id] ?? [],
    };
  });
  return {
    requestsPerTarget: out.rounds * p.perRound,
    rounds: out.rounds,
    rows,
    skipped: ctx.stack.skipped.filter((s) => TARGETS.includes(s.target)),
  };
}
