/**
 * Scenario 5's writer bench, in its own process: the gateway's `HistoryWriter` with its default
 * batching, into a fresh local libSQL file, fed finished request + attempt rows in chunks as
 * fast as it drains them. Answers rows per second, the time of each batch (the local driver runs
 * it synchronously, so that is how long the thread is blocked) and the longest event-loop stall.
 */
import type { Client } from "@libsql/client";
import { openDatabase } from "../../db/client.ts";
import { HistoryWriter } from "../../db/history_writer.ts";
import { migrate } from "../../db/migrate.ts";
import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import { LoopProbe, type LoopProbeSummary } from "../loop_probe.ts";
import { summarize, type Summary } from "../stats.ts";
import { printResult, readJob } from "./job.ts";

export interface HistoryRowsJob {
  dbPath: string;
  requests: number;
  /** Requests queued before each flush: 250 requests are 500 rows, one default batch. */
  chunk: number;
  /** Requests queued at once afterwards, as after a database outage or a burst. */
  backlog: number;
  budgetMs: number;
}

export interface HistoryRowsResult {
  rows: number;
  seconds: number;
  rowsPerSecond: number;
  batchMs: Summary;
  rowsPerBatch: number;
  probe: LoopProbeSummary;
  /** Draining `backlog` requests' rows: the writer runs batch after batch without yielding. */
  backlogRows: number;
  backlogStallMs: number;
}

function rowsFor(i: number, instanceId: string): [RequestRecord, AttemptRecord] {
  const id = crypto.randomUUID();
  const startedAt = Date.now();
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
    sessionId: null,
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
  };
  return [request, attempt];
}

async function run(job: HistoryRowsJob): Promise<HistoryRowsResult> {
  const db = await openDatabase(`file:${job.dbPath}`);
  await migrate(db);
  const batches: number[] = [];
  const client: Client = db.client;
  const batch = client.batch.bind(client);
  client.batch = async (...args: Parameters<Client["batch"]>) => {
    const started = performance.now();
    try {
      return await batch(...args);
    } finally {
      batches.push(performance.now() - started);
    }
  };
  const writer = new HistoryWriter(db);
  const instanceId = crypto.randomUUID();
  const probe = new LoopProbe(5);
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
  db.close();
  return {
    rows,
    seconds,
    rowsPerSecond: rows / seconds,
    batchMs,
    rowsPerBatch,
    probe: steady,
    backlogRows,
    backlogStallMs,
  };
}

async function drainBacklog(
  writer: HistoryWriter,
  opts: { probe: LoopProbe; requests: number; instanceId: string },
): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 20));
  opts.probe.reset();
  for (let i = 0; i < opts.requests; i++) {
    const [request, attempt] = rowsFor(i, opts.instanceId);
    writer.writeRequest(request);
    writer.writeAttempt(attempt);
  }
  await writer.flush();
  // One more probe tick, so the stall just caused is counted.
  await new Promise((resolve) => setTimeout(resolve, opts.probe.intervalMs * 2));
  return opts.probe.summary().maxStallMs;
}

if (import.meta.main) printResult(await run(readJob<HistoryRowsJob>()));
