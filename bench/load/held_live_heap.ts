/**
 * Scenario 4's second hold: the JS heap a held stream keeps alive. Reads pulsegate's heap after a
 * full GC (`/stats?gc=1`, bench/gateway_entry.ts), opens `count` streams whose upstream stays
 * silent, waits until each has had a keep-alive, reads the heap after a full GC again, then
 * cancels every stream (the fake is never released: no content is sent). The difference is what
 * the held streams keep reachable, garbage not counted.
 */
import type { RequestSpec } from "../targets.ts";
import { printResult, readJob } from "./job.ts";
import { openStream, type Stream, waitFor } from "./held_streams.ts";

export interface HeldHeapJob {
  request: RequestSpec;
  count: number;
  openPerSecond: number;
  /** pulsegate's bench-only stats URL; the gateway must run with `--v8-flags=--expose-gc`. */
  statsUrl: string;
  holdTimeoutMs: number;
}

export interface HeldHeapJobResult {
  count: number;
  held: number;
  heapBefore: number;
  heapHeld: number;
  externalBefore: number;
  externalHeld: number;
}

interface MemoryStats {
  heapUsedBytes: number;
  externalBytes: number;
}

async function collected(statsUrl: string): Promise<MemoryStats> {
  const res = await fetch(`${statsUrl}?gc=1`);
  if (!res.ok) throw new Error(`${statsUrl}?gc=1: HTTP ${res.status}: ${await res.text()}`);
  return await res.json() as MemoryStats;
}

async function run(job: HeldHeapJob): Promise<HeldHeapJobResult> {
  const before = await collected(job.statsUrl);
  const streams: Stream[] = [];
  const perTick = Math.max(1, Math.round(job.openPerSecond / 50));
  while (streams.length < job.count) {
    for (let i = 0; i < perTick && streams.length < job.count; i++) {
      streams.push(openStream(job.request, job.holdTimeoutMs + 10_000));
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const isHeld = (s: Stream) => s.error !== null || s.keepAlives > 0;
  await waitFor(() => streams.every(isHeld), job.holdTimeoutMs);
  const held = streams.filter((s) => s.error === null && s.keepAlives > 0).length;
  const during = await collected(job.statsUrl);
  for (const s of streams) s.stop.abort();
  await Promise.all(streams.map((s) => s.ended));
  return {
    count: job.count,
    held,
    heapBefore: before.heapUsedBytes,
    heapHeld: during.heapUsedBytes,
    externalBefore: before.externalBytes,
    externalHeld: during.externalBytes,
  };
}

if (import.meta.main) printResult(await run(readJob<HeldHeapJob>()));
