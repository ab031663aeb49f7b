/**
 * Scenario 5: history writes. First the batched writer alone, in its own process, into a fresh
 * local libSQL file: rows/s and how long each batch holds the thread. Then inside the gateway
 * while it serves the zero-delay route flat out: rows written per second, the batch times, and
 * the longest event-loop stall its probe saw, with history on and (for contrast) off.
 */
import { autocannon } from "../autocannon.ts";
import {
  type BenchContext,
  gatewayStats,
  loadJob,
  resetGatewayStats,
  running,
  setProbes,
} from "../context.ts";
import type { HistoryRowsJob, HistoryRowsResult } from "../load/history_rows.ts";
import type { HistoryResult, HistoryUnderLoad } from "../results.ts";
import { round, roundSummary, summarize } from "../stats.ts";
import { requestFor, type TargetId } from "../targets.ts";

async function writerAlone(ctx: BenchContext): Promise<HistoryResult["writer"]> {
  const p = ctx.profile.history;
  const dir = `${ctx.workDir}/history_rows`;
  await Deno.mkdir(dir, { recursive: true });
  const job: HistoryRowsJob = {
    dbPath: `${dir}/history.db`,
    requests: p.requests,
    chunk: p.chunk,
    backlog: p.backlog,
    budgetMs: 60_000,
  };
  ctx.log(`history writer: ${p.requests} requests' rows`);
  const r = await loadJob<HistoryRowsResult>(ctx, {
    script: "history_rows.ts",
    job,
    timeoutMs: 120_000,
  });
  return {
    rows: r.rows,
    rowsPerSecond: Math.round(r.rowsPerSecond),
    rowsPerBatch: round(r.rowsPerBatch, 1),
    batchMs: roundSummary(r.batchMs, 2),
    maxStallMs: round(r.probe.maxStallMs, 2),
    backlogRows: r.backlogRows,
    backlogStallMs: round(r.backlogStallMs, 1),
  };
}

async function underLoad(
  ctx: BenchContext,
  target: TargetId,
): Promise<HistoryUnderLoad> {
  const p = ctx.profile.history;
  const control = ctx.stack.controls[target]!;
  const before = await gatewayStats(control);
  await resetGatewayStats(control);
  const run = await autocannon(ctx, {
    request: requestFor(target, { endpoints: ctx.stack.endpoints, mode: "zero" }),
    connections: p.concurrency,
    seconds: p.seconds,
    warmupSeconds: 0,
  });
  const after = await gatewayStats(control);
  const batchMs = summarize(after.batchesMs);
  ctx.log(
    `history under load, ${target}: ${Math.round(run.rps)} req/s, ` +
      `stall max ${round(after.probe?.maxStallMs ?? NaN, 1)} ms`,
  );
  return {
    target,
    rps: round(run.rps, 1),
    rowsPerSecond: Math.round((after.writer.written - before.writer.written) / p.seconds),
    batches: after.batchesMs.length,
    batchMs: roundSummary(batchMs, 2),
    maxStallMs: round(after.probe?.maxStallMs ?? NaN, 2),
    p99StallMs: round(after.probe?.p99StallMs ?? NaN, 2),
    stallsOver10ms: after.probe?.over10ms ?? 0,
  };
}

export async function historyWrites(ctx: BenchContext): Promise<HistoryResult> {
  const writer = await writerAlone(ctx);
  const rows: HistoryUnderLoad[] = [];
  await setProbes(ctx, true);
  try {
    for (const target of running(ctx, ["pulsegate", "pulsegate_no_history"])) {
      rows.push(await underLoad(ctx, target));
    }
  } finally {
    await setProbes(ctx, false);
  }
  const p = ctx.profile.history;
  return { writer, underLoad: { concurrency: p.concurrency, seconds: p.seconds, rows } };
}
