/**
 * Scenario 4: thousands of streams held open at once. The fake answers headers and then stays
 * silent, so pulsegate holds each stream through its opening hold and sends `: keep-alive`
 * comments; once every stream is held the bench reads the gateway's resident memory and releases
 * the fake, which sends each stream its slow content. Each count runs on a fresh gateway (its
 * baseline memory is then its own), at a time scale that makes the 15 s hold 3 s. Once the
 * content is through, the same gateway holds as many streams a second time, reading its JS heap
 * after a full GC before and while they are held (load/held_live_heap.ts), and cancels them: the
 * heap a held stream keeps alive, garbage not counted, without a forced GC before the timed
 * content (it would start that phase on a freshly collected heap).
 */
import type { BenchContext } from "../context.ts";
import { loadJob } from "../context.ts";
import type { HeldJob, HeldJobResult } from "../load/held_streams.ts";
import type { HeldHeapJob, HeldHeapJobResult } from "../load/held_live_heap.ts";
import type { HeldResult, HeldRow } from "../results.ts";
import type { Service } from "../services.ts";
import { startFloor, startPulsegate } from "../stack.ts";
import { round, roundSummary } from "../stats.ts";
import { gatewayConfig, requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

/** 15 s becomes 3 s: 5,000 streams get ~1,700 keep-alives/s, ten times the real rate. */
const TIME_SCALE = 0.2;
const HOLD_MS = 15_000 * TIME_SCALE;
const KEEP_ALIVE_MS = 15_000 * TIME_SCALE;
/** The fake's silence is bounded too, below the scaled 300 s idle timeout (60 s). */
const MAX_SILENCE_MS = 25_000;
const LATE_MS = 50;
const MiB = 1024 * 1024;

async function inflightOf(gateway: string): Promise<number> {
  const text = await (await fetch(`${gateway}/metrics`)).text();
  return Number(/^pulsegate_inflight_requests (\d+)/m.exec(text)?.[1] ?? NaN);
}

/** Polls until the gateway's in-flight gauge reads 0, for at most 10 s; answers the last read. */
async function settledInflight(gateway: string): Promise<number> {
  let last = await inflightOf(gateway);
  for (let i = 0; i < 50 && last !== 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    last = await inflightOf(gateway);
  }
  return last;
}

/** The fake's mode for this profile's held streams. */
export function heldMode(ctx: BenchContext): string {
  const p = ctx.profile.held;
  return `held-${MAX_SILENCE_MS}-${p.deltas}-${p.deltaGapMs}`;
}

/**
 * A fresh pulsegate for held streams, on the scenario's time scale. `--expose-gc` only defines
 * `gc()`, for `/stats?gc=1`; nothing calls it during the timed hold.
 */
export function startHeldGateway(ctx: BenchContext, opts: { name: string }): Promise<Service> {
  return startPulsegate(ctx.layout, {
    name: opts.name,
    dir: `${ctx.workDir}/${opts.name}`,
    config: gatewayConfig({ fake: ctx.stack.fake.url, routes: { held: heldMode(ctx) } }),
    history: true,
    timeScale: TIME_SCALE,
    denoFlags: ["--v8-flags=--expose-gc"],
  });
}

/** The load job that holds `count` streams through a proxy, then has the fake release them. */
export function heldJob(
  ctx: BenchContext,
  opts: { target: TargetId; proxy: Service; count: number; mode: string },
): HeldJob {
  const p = ctx.profile.held;
  const endpoints = { fake: ctx.stack.fake.url, [opts.target]: opts.proxy.url };
  const rampMs = (opts.count / p.openPerSecond) * 1000;
  return {
    request: requestFor(opts.target, { endpoints, mode: opts.mode, route: "held", stream: true }),
    count: opts.count,
    openPerSecond: p.openPerSecond,
    expectDeltas: p.deltas,
    needKeepAlive: opts.target === "pulsegate",
    releaseUrl: `${ctx.stack.fake.url}/_release`,
    proxyPid: opts.proxy.pid,
    statsUrl: opts.proxy.ready.control ? `${opts.proxy.ready.control}/stats` : null,
    lateMs: LATE_MS,
    holdTimeoutMs: rampMs + HOLD_MS + 15_000,
    endTimeoutMs: p.deltas * p.deltaGapMs + 20_000,
  };
}

async function holdThrough(
  ctx: BenchContext,
  opts: { target: TargetId; proxy: Service; count: number; mode: string },
): Promise<HeldRow> {
  const job = heldJob(ctx, opts);
  ctx.log(`held streams: ${opts.count} through ${opts.target}`);
  const cpuBefore = await opts.proxy.cpuMs();
  const r = await loadJob<HeldJobResult>(ctx, {
    script: "held_streams.ts",
    job,
    timeoutMs: job.holdTimeoutMs + job.endTimeoutMs + 30_000,
  });
  const proxyCpuSeconds = round(((await opts.proxy.cpuMs()) - cpuBefore) / 1000, 2);
  const inflightAfter = opts.target === "pulsegate" ? await settledInflight(opts.proxy.url) : null;
  return {
    target: opts.target,
    label: TARGET_LABELS[opts.target],
    count: r.count,
    held: r.held,
    rampMs: Math.round(r.rampMs),
    rssBeforeMiB: round(r.rssBeforeBytes / MiB, 1),
    rssHeldMiB: round(r.rssHeldBytes / MiB, 1),
    bytesPerStream: Math.round((r.rssHeldBytes - r.rssBeforeBytes) / r.count),
    heapBytesPerStream: r.heap ? Math.round((r.heap.usedHeld - r.heap.usedBefore) / r.count) : null,
    externalBytesPerStream: r.heap
      ? Math.round((r.heap.externalHeld - r.heap.externalBefore) / r.count)
      : null,
    liveHeapBytesPerStream: null,
    completeStreams: r.completeStreams,
    lostDeltas: r.lostDeltas,
    lateDeltas: r.lateDeltas,
    delayMs: roundSummary(r.delayMs),
    keepAlivesMin: r.keepAlivesPerStream.min,
    proxyCpuSeconds,
    inflightAfter,
    errors: r.errorCount,
    errorExamples: r.errorExamples,
  };
}

/**
 * The JS heap per held stream, garbage not counted: a second hold of `count` streams on a
 * gateway whose timed run is over, its heap read after a full GC before and while they are held.
 */
async function liveHeapPerStream(
  ctx: BenchContext,
  opts: { proxy: Service; count: number; mode: string },
): Promise<number | null> {
  const control = opts.proxy.ready.control;
  if (!control) return null;
  const held = heldJob(ctx, { ...opts, target: "pulsegate" });
  const job: HeldHeapJob = {
    request: held.request,
    count: opts.count,
    openPerSecond: held.openPerSecond,
    statsUrl: `${control}/stats`,
    holdTimeoutMs: held.holdTimeoutMs,
  };
  const r = await loadJob<HeldHeapJobResult>(ctx, {
    script: "held_live_heap.ts",
    job,
    timeoutMs: job.holdTimeoutMs + 30_000,
  });
  await settledInflight(opts.proxy.url);
  const perStream = r.held > 0 ? Math.round((r.heapHeld - r.heapBefore) / r.held) : null;
  ctx.log(
    `held streams: ${r.held} of ${r.count} held again, ${perStream ?? "-"} B of live JS heap each`,
  );
  return perStream;
}

export async function heldStreams(ctx: BenchContext): Promise<HeldResult> {
  const p = ctx.profile.held;
  const mode = heldMode(ctx);
  const rows: HeldRow[] = [];
  for (const count of p.counts) {
    const gw = await startHeldGateway(ctx, { name: `pulsegate_held_${count}` });
    try {
      const row = await holdThrough(ctx, { target: "pulsegate", proxy: gw, count, mode });
      row.liveHeapBytesPerStream = await liveHeapPerStream(ctx, { proxy: gw, count, mode });
      rows.push(row);
    } finally {
      await gw.stop();
    }
  }
  // The floors at the largest count: what holding a socket pair costs at all, and what it costs
  // once each chunk is read and written in JavaScript (the JS relay).
  for (const floorMode of p.floorCount ? ["pass", "js"] as const : []) {
    const target = floorMode === "js" ? "floor_js" : "floor";
    const floor = await startFloor(ctx.layout, {
      fake: ctx.stack.fake.url,
      name: `${target}_held`,
      mode: floorMode,
    });
    try {
      rows.push(await holdThrough(ctx, { target, proxy: floor, count: p.floorCount!, mode }));
    } finally {
      await floor.stop();
    }
  }
  return {
    timeScale: TIME_SCALE,
    holdMs: HOLD_MS,
    keepAliveMs: KEEP_ALIVE_MS,
    deltas: p.deltas,
    deltaGapMs: p.deltaGapMs,
    lateMs: LATE_MS,
    rows,
  };
}
