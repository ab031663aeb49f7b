/**
 * Scenario 5's writer bench, in its own process: the gateway's `HistoryWriter` with its default
 * batching, into a fresh local libSQL file, fed finished request + attempt rows in chunks as
 * fast as it drains them. Answers rows per second, the time of each batch (as the writer's
 * `onBatch` reports it) and the longest stall of this process's event loop.
 *
 * `executor: "worker"` is what the gateway uses for a local file (`workerExecutor`): a batch runs
 * on a worker thread, so its time is not time this thread is blocked, and the stall is what
 * building and posting the statements costs (plus, pinned to one core as the bench runs it, any
 * wait for the worker to yield that core). `"in-thread"` (`inProcessExecutor`, the executor
 * of remote databases) runs the local driver's synchronous batch on this thread: a contrast only,
 * to show what the worker takes off the serving thread.
 */
import { type BatchExecutor, inProcessExecutor, workerExecutor } from "../../db/batch_executor.ts";
import { openDatabase } from "../../db/client.ts";
import { HistoryWriter } from "../../db/history_writer.ts";
import { migrate } from "../../db/migrate.ts";
import { MIGRATIONS } from "../../db/migrations.ts";
import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import { newRequestId } from "../../gateway/live/request_id.ts";
import { LoopProbe, type LoopProbeSummary } from "../loop_probe.ts";
import { summarize, type Summary } from "../stats.ts";
import { printResult, readJob } from "./job.ts";

export interface HistoryRowsJob {
  dbPath: string;
  executor: "worker" | "in-thread";
  requests: number;
  /** Requests queued before each flush: 100 requests are 200 rows, one default batch. */
  chunk: number;
  /** Requests queued at once afterwards, as after a database outage or a burst. */
  backlog: number;
  /** How long the probe first runs with nothing else to do: the stall floor of this machine. */
  idleMs: number;
  budgetMs: number;
  /** Migrate only up to the session summaries: their write cost, by contrast. */
  withoutSessionSummaries?: boolean;
}

export interface HistoryRowsResult {
  rows: number;
  seconds: number;
  rowsPerSecond: number;
  batchMs: Summary;
  rowsPerBatch: number;
  probe: LoopProbeSummary;
  /** The probe alone, before any row: what a stall figure is to be compared with. */
  idle: LoopProbeSummary;
  /** Draining `backlog` requests' rows queued at once: the longest stall it caused here. */
  backlogRows: number;
  backlogStallMs: number;
}

function rowsFor(i: number, instanceId: string): [RequestRecord, AttemptRecord] {
  // As the gateway makes them (docs/design.md "History"): time-ordered.
  const startedAt = Date.now();
  const id = newRequestId(startedAt);
  const request: RequestRecord = {
    id,
    instanceId,
    state: "closed",
    startedAt,
    endedAt: startedAt + 21,
    clientFormat: "openai-chat",
    route: "bench",
    stream: i % 2 === 0,
    keyId: null,
    // Sessions of 20 requests, as a coding agent's turns: each row updates its session's summary.
    sessionId: `bench-${instanceId.slice(0, 8)}-${Math.floor(i / 20)}`,
    status: 200,
    outcome: "success",
    failureSource: null,
    errorCode: null,
    errorMessage: null,
    upstream: "fake",
    upstreamModel: "m",
    firstContentMs: 20,
    durationMs: 21,
    inputTokens: 5,
    outputTokens: 5,
    cachedTokens: null,
    reasoningTokens: null,
    tokensEstimated: false,
    usageSource: "upstream",
    costUsd: null,
    cacheWriteTokens: null,
    cacheWrite1hTokens: null,
    cacheWriteUsd: null,
    movedFrom: null,
    toolServer: null,
    bytesIn: null,
    bytesOut: null,
  };
  const attempt: AttemptRecord = {
    requestId: id,
    hop: 1,
    upstream: "fake",
    model: "m",
    outcome: "success",
    status: 200,
    errorCode: null,
    errorMessage: null,
    startedAt,
    headersMs: 20,
    firstContentMs: 20,
    durationMs: 21,
    inputTokens: 5,
    outputTokens: 5,
    tokensEstimated: false,
    usageSource: "upstream",
    droppedHeaders: null,
    costUsd: null,
    resumeOffset: null,
    cachedTokens: null,
    cacheWriteTokens: null,
    cacheWrite1hTokens: null,
    cacheWriteUsd: null,
    movedFrom: null,
  };
  return [request, attempt];
}

async function run(job: HistoryRowsJob): Promise<HistoryRowsResult> {
  const db = await openDatabase(`file:${job.dbPath}`);
  const at = MIGRATIONS.findIndex((m) => m.name === "session_summaries");
  await migrate(db, job.withoutSessionSummaries ? { migrations: MIGRATIONS.slice(0, at) } : {});
  const batches: number[] = [];
  const executor: BatchExecutor = job.executor === "worker"
    ? workerExecutor(`file:${job.dbPath}`)
    : inProcessExecutor(db);
  // The worker opens its connection on first use: not a batch's time, so done before the clock.
  await executor.run([]);
  const writer = new HistoryWriter(db, { executor, onBatch: ({ ms }) => batches.push(ms) });
  const instanceId = crypto.randomUUID();
  const probe = new LoopProbe(5);
  await new Promise((resolve) => setTimeout(resolve, job.idleMs));
  const idle = probe.summary();
  probe.reset();
  const started = performance.now();
  const deadline = started + job.budgetMs;
  let queued = 0;
  while (queued < job.requests && performance.now() < deadline) {
    for (let i = 0; i < job.chunk && queued < job.requests; i++, queued++) {
      const [request, attempt] = rowsFor(queued, instanceId);
      writer.writeRequest(request);
      writer.writeAttempt(attempt);
    }
    await writer.flush();
    // Let timers (the probe) run between bursts, as a serving gateway would.
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  await writer.flush();
  const seconds = (performance.now() - started) / 1000;
  const rows = writer.stats().written;
  const steady = probe.summary();
  const batchMs = summarize(batches);
  const rowsPerBatch = batches.length ? rows / batches.length : 0;
  const backlogStallMs = await drainBacklog(writer, { probe, requests: job.backlog, instanceId });
  probe.stop();
  const backlogRows = writer.stats().written - rows;
  await writer.close();
  await executor.close();
  db.close();
  return {
    rows,
    seconds,
    rowsPerSecond: rows / seconds,
    batchMs,
    rowsPerBatch,
    probe: steady,
    idle,
    backlogRows,
    backlogStallMs,
  };
}

async function drainBacklog(
  writer: HistoryWriter,
  opts: { probe: LoopProbe; requests: number; instanceId: string },
): Promise<number> {
  const rows = Array.from({ length: opts.requests }, (_, i) => rowsFor(i, opts.instanceId));
  await new Promise((resolve) => setTimeout(resolve, 20));
  for (const [request, attempt] of rows) {
    writer.writeRequest(request);
    writer.writeAttempt(attempt);
  }
  // From here on only the drain runs: queuing rows is each request's own (tiny) cost.
  opts.probe.reset();
  await writer.flush();
  // One more probe tick, so the stall just caused is counted.
  await new Promise((resolve) => setTimeout(resolve, opts.probe.intervalMs * 2));
  return opts.probe.summary().maxStallMs;
}

if (import.meta.main) printResult(await run(readJob<HistoryRowsJob>()));
