/**
 * Scenario 4's client: opens `count` streams whose upstream stays silent, waits until every one
 * is being held (it has had its headers and, through pulsegate, a `: keep-alive`), reads the
 * proxy's resident memory, then releases the fake so each stream gets its slow content. It
 * answers what each stream received: lost deltas, late deltas, keep-alives.
 */
import { summarize, type Summary } from "../stats.ts";
import type { RequestSpec } from "../targets.ts";
import { printResult, readJob } from "./job.ts";
import { readSse } from "./sse_reader.ts";

export interface HeldJob {
  request: RequestSpec;
  count: number;
  /** Streams opened per second: a burst of thousands of SYNs would overflow the listen queue. */
  openPerSecond: number;
  expectDeltas: number;
  /** Whether a stream counts as held only once a keep-alive came (pulsegate) or at headers. */
  needKeepAlive: boolean;
  releaseUrl: string;
  proxyPid: number;
  /** pulsegate's bench-only stats URL, for its JS heap and external memory; null elsewhere. */
  statsUrl: string | null;
  lateMs: number;
  holdTimeoutMs: number;
  endTimeoutMs: number;
}

export interface HeldJobResult {
  count: number;
  held: number;
  rampMs: number;
  rssBeforeBytes: number;
  rssHeldBytes: number;
  /** V8 heap used and external (ArrayBuffer) memory, before and held; null without statsUrl. */
  heap:
    | { usedBefore: number; usedHeld: number; externalBefore: number; externalHeld: number }
    | null;
  completeStreams: number;
  lostDeltas: number;
  lateDeltas: number;
  delayMs: Summary;
  keepAlivesPerStream: { min: number; max: number };
  errorCount: number;
  errorExamples: string[];
}

export interface Stream {
  headers: boolean;
  keepAlives: number;
  deltas: number;
  delays: number[];
  done: boolean;
  error: string | null;
  ended: Promise<void>;
  stop: AbortController;
}

export function openStream(request: RequestSpec, timeoutMs: number): Stream {
  const stop = new AbortController();
  const s: Stream = {
    headers: false,
    keepAlives: 0,
    deltas: 0,
    delays: [],
    done: false,
    error: null,
    ended: Promise.resolve(),
    stop,
  };
  s.ended = (async () => {
    try {
      const res = await fetch(request.url, {
        method: "POST",
        headers: request.headers,
        body: request.body,
        signal: AbortSignal.any([stop.signal, AbortSignal.timeout(timeoutMs)]),
      });
      s.headers = true;
      if (res.status !== 200 || !res.body) {
        s.error = `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
        return;
      }
      await readSse(res.body, (item, at) => {
        if (item.kind === "keepalive") s.keepAlives++;
        else if (item.kind === "done") s.done = true;
        else if (item.kind === "content") {
          s.deltas++;
          s.delays.push(at - item.sentAt);
        } else if (item.kind === "other") s.error ??= `unexpected event: ${item.text}`;
      });
    } catch (err) {
      s.error ??= err instanceof Error ? err.message : String(err);
    }
  })();
  return s;
}

async function rssOf(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls (bounded by `timeoutMs`) until `ok` holds; answers whether it did. */
export async function waitFor(ok: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!ok()) {
    if (performance.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

interface MemoryStats {
  heapUsedBytes: number;
  externalBytes: number;
}

async function memoryOf(statsUrl: string | null): Promise<MemoryStats | null> {
  if (!statsUrl) return null;
  return await (await fetch(statsUrl)).json() as MemoryStats;
}

async function run(job: HeldJob): Promise<HeldJobResult> {
  const rssBeforeBytes = await rssOf(job.proxyPid);
  const memBefore = await memoryOf(job.statsUrl);
  const streams: Stream[] = [];
  const started = performance.now();
  const lifetime = job.holdTimeoutMs + job.endTimeoutMs + 10_000;
  const perTick = Math.max(1, Math.round(job.openPerSecond / 50));
  while (streams.length < job.count) {
    for (let i = 0; i < perTick && streams.length < job.count; i++) {
      streams.push(openStream(job.request, lifetime));
    }
    await sleep(20);
  }
  const isHeld = (s: Stream) =>
    s.error !== null || (job.needKeepAlive ? s.keepAlives > 0 : s.headers);
  await waitFor(() => streams.every(isHeld), job.holdTimeoutMs);
  const rampMs = performance.now() - started;
  const held = streams.filter((s) => s.error === null && isHeld(s)).length;
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    samples.push(await rssOf(job.proxyPid));
    await sleep(200);
  }
  const rssHeldBytes = summarize(samples).p50;
  const memHeld = await memoryOf(job.statsUrl);
  await fetch(job.releaseUrl, { method: "POST" }).then((r) => r.body?.cancel());
  const all = Promise.all(streams.map((s) => s.ended));
  // A pending timer would keep this process alive after the streams end: clear it.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<true>((
    resolve,
  ) => (timer = setTimeout(() => resolve(true), job.endTimeoutMs)));
  const timedOut = await Promise.race([all.then(() => false), late]);
  clearTimeout(timer);
  if (timedOut) {
    for (const s of streams) s.stop.abort();
    await all;
  }
  const delays = streams.flatMap((s) => s.delays);
  const errors = streams.filter((s) => s.error !== null).map((s) => s.error!);
  const keepAlives = streams.map((s) => s.keepAlives);
  return {
    count: job.count,
    held,
    rampMs,
    rssBeforeBytes,
    rssHeldBytes,
    heap: memBefore && memHeld
      ? {
        usedBefore: memBefore.heapUsedBytes,
        usedHeld: memHeld.heapUsedBytes,
        externalBefore: memBefore.externalBytes,
        externalHeld: memHeld.externalBytes,
      }
      : null,
    completeStreams: streams.filter((s) => s.done && s.deltas === job.expectDeltas && !s.error)
      .length,
    lostDeltas: streams.reduce((n, s) => n + Math.max(0, job.expectDeltas - s.deltas), 0),
    lateDeltas: delays.filter((ms) => ms > job.lateMs).length,
    delayMs: summarize(delays),
    keepAlivesPerStream: { min: Math.min(...keepAlives), max: Math.max(...keepAlives) },
    errorCount: errors.length,
    errorExamples: [...new Set(errors)].slice(0, 3),
  };
}

if (import.meta.main) printResult(await run(readJob<HeldJob>()));
