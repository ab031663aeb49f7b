/**
 * Scenario 3: relaying a stream of 64 deltas 20 ms apart. Added time to first token and added
 * per-delta delay are each target's p50/p99 minus direct's; the added gap is measured per delta
 * against the gap the fake put there, so direct's own jitter shows as direct's row.
 */
import { type BenchContext, loadJob, running } from "../context.ts";
import type { StreamJob, StreamTargetResult } from "../load/stream_probe.ts";
import { STREAM_DELTAS, STREAM_GAP_MS } from "../fake_upstream.ts";
import type { StreamingResult, StreamingRow } from "../results.ts";
import { round, roundSummary, summarize } from "../stats.ts";
import { requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

const TARGETS: TargetId[] = ["direct", "floor", "pulsegate", "portkey"];

/** CPU ms so far of each proxy among `targets` (direct has none). */
async function proxyCpu(
  ctx: BenchContext,
  targets: TargetId[],
): Promise<Partial<Record<TargetId, number>>> {
  const out: Partial<Record<TargetId, number>> = {};
  for (const id of targets) {
    const proxy = ctx.stack.proxies[id];
    if (proxy) out[id] = await proxy.cpuMs();
  }
  return out;
}

export async function streaming(ctx: BenchContext): Promise<StreamingResult> {
  const p = ctx.profile.streaming;
  const targets = running(ctx, TARGETS);
  const job: StreamJob = {
    targets: targets.map((id) => ({
      id,
      request: requestFor(id, {
        endpoints: ctx.stack.endpoints,
        mode: "stream64",
        stream: true,
      }),
    })),
    rounds: p.rounds,
    concurrency: p.concurrency,
    expectDeltas: STREAM_DELTAS,
    budgetMs: p.budgetMs,
  };
  ctx.log(`streaming: ${targets.join(", ")}, ${p.rounds} rounds of ${p.concurrency} streams`);
  const cpuBefore = await proxyCpu(ctx, targets);
  const out = await loadJob<Record<string, StreamTargetResult>>(ctx, {
    script: "stream_probe.ts",
    job,
    timeoutMs: p.budgetMs + 60_000,
  });
  const cpuAfter = await proxyCpu(ctx, targets);
  const direct = out.direct;
  const directTtft = summarize(direct?.ttftMs ?? []);
  const directDelay = summarize(direct?.delayMs ?? []);
  const rows: StreamingRow[] = targets.map((id) => {
    const r = out[id]!;
    const ttft = summarize(r.ttftMs);
    const delay = summarize(r.delayMs);
    return {
      target: id,
      label: TARGET_LABELS[id],
      streams: r.streams,
      complete: r.complete,
      lostDeltas: r.lostDeltas,
      ttftMs: roundSummary(ttft),
      delayMs: roundSummary(delay),
      addedGapMs: roundSummary(summarize(r.addedGapMs)),
      added: id === "direct" || r.complete === 0 ? null : {
        ttftP50: round(ttft.p50 - directTtft.p50),
        ttftP99: round(ttft.p99 - directTtft.p99),
        delayP50: round(delay.p50 - directDelay.p50),
        delayP99: round(delay.p99 - directDelay.p99),
      },
      cpuUsPerDelta: cpuBefore[id] === undefined || r.delayMs.length === 0
        ? null
        : round(((cpuAfter[id]! - cpuBefore[id]!) * 1000) / r.delayMs.length, 1),
      errors: r.errors,
    };
  });
  return {
    deltas: STREAM_DELTAS,
    deltaGapMs: STREAM_GAP_MS,
    rows,
    skipped: ctx.stack.skipped.filter((s) => TARGETS.includes(s.target)),
  };
}
