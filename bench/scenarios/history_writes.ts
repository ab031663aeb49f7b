/**
 * Scenario 5: history writes. First the batched writer alone, in its own process, into a fresh
 * local libSQL file: rows/s, how long each batch takes and the longest stall of that process's
 * event loop, with the executor the gateway uses for a local file (a worker thread) and, for
 * contrast, with the batch run on the calling thread. Then inside the gateway while it serves
 * the zero-delay route flat out: rows written per second, the worker's batch times, the CPU
 * history costs, and the longest stall of the serving thread, with history on and (for
 * contrast) off.
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
import type { HistoryResult, HistoryUnderLoad, HistoryWriterRun } from "../results.ts";
import { round, roundSummary, summarize } from "../stats.ts";
import { requestFor, type TargetId } from "../targets.ts";

async function writerAlone(
  ctx: BenchContext,
  executor: HistoryRowsJob["executor"],
): Promise<HistoryWriterRun> {
  const p = ctx.profile.history;
  const dir = `${ctx.workDir}/history_rows_${executor}`;
  await Deno.mkdir(dir, { recursive: true });
  const requests = executor === "worker" ? p.requests : p.inThreadRequests;
  const job: HistoryRowsJob = {
    dbPath: `${dir}/history.db`,
    executor,
    requests,
    chunk: p.chunk,
    backlog: p.backlog,
    idleMs: ctx.profile.name === "full" ? 1_000 : 200,
    budgetMs: 60_000,
  };
  ctx.log(`history writer (${executor}): ${requests} requests' rows`);
  const r = await loadJob<HistoryRowsResult>(ctx, {
    script: "history_rows.ts",
    job,
    timeoutMs: 120_000,
  });
  return {
    executor,
    rows: r.rows,
    rowsPerSecond: Math.round(r.rowsPerSecond),
    rowsPerBatch: round(r.rowsPerBatch, 1),
    batchMs: roundSummary(r.batchMs, 2),
    maxStallMs: round(r.probe.maxStallMs, 2),
    p99StallMs: round(r.probe.p99StallMs, 2),
    idleStallMs: { max: round(r.idle.maxStallMs, 2), p99: round(r.idle.p99StallMs, 2) },
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
  const perRequest = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined && run.requests > 0
      ? round(((a - b) * 1000) / run.requests, 1)
      : null;
  ctx.log(
    `history under load, ${target}: ${Math.round(run.rps)} req/s, ` +
      `stall max ${round(after.probe?.maxStallMs ?? NaN, 1)} ms`,
  );
  return {
    target,
    rps: round(run.rps, 1),
    rowsPerSecond: Math.round((after.writer.written - before.writer.written) / p.seconds),
    rowsPerRequest: run.requests > 0
      ? round((after.writer.written - before.writer.written) / run.requests, 2)
      : 0,
    batches: after.batchesMs.length,
    batchMs: roundSummary(batchMs, 2),
    maxStallMs: round(after.probe?.maxStallMs ?? NaN, 2),
    p99StallMs: round(after.probe?.p99StallMs ?? NaN, 2),
    stallsOver10ms: after.probe?.over10ms ?? 0,
    cpuUsPerRequest: perRequest(after.threads?.totalMs, before.threads?.totalMs),
    servingCpuUsPerRequest: perRequest(after.threads?.mainMs, before.threads?.mainMs),
    workerCpuUsPerRequest: perRequest(after.threads?.workerMs, before.threads?.workerMs),
  };
}

export async function historyWrites(ctx: BenchContext): Promise<HistoryResult> {
  const writer = await writerAlone(ctx, "worker");
  const writerInThread = await writerAlone(ctx, "in-thread");
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
  return {
    writer,
    writerInThread,
    underLoad: { concurrency: p.concurrency, seconds: p.seconds, rows },
  };
}
