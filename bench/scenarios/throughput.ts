/**
 * Scenario 2: the most requests/s each target holds with p99 under 50 ms and no error, against a
 * fake that answers after 20 ms, at concurrency 1 to 256. Levels are the outer loop and the
 * target order rotates per level, so no target gets the machine's quiet (or busy) minute. Each
 * proxy's resident memory is read once the last level is done (the targets compare pulsegate's to
 * the floor's).
 *
 * Then the same for the floor and pulsegate alone against the zero-delay fake with a 20 ms bound:
 * requests/s at p99 under 20 ms, as published gateway comparisons count it (a 20 ms bound cannot
 * be held against a fake that itself takes 20 ms). Here a target stops after its first level that
 * misses the bound, and pulsegate's event-loop probe is off, as shipped.
 */
import { autocannon } from "../autocannon.ts";
import {
  type BenchContext,
  gatewayStats,
  resetGatewayStats,
  running,
  setProbes,
} from "../context.ts";
import type {
  ThroughputLevel,
  ThroughputResult,
  ThroughputRow,
  ThroughputSweep,
} from "../results.ts";
import { round } from "../stats.ts";
import { type FakeMode, requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

export const BOUND_MS = 50;
const UPSTREAM_DELAY_MS = 20;
export const ZERO_DELAY_BOUND_MS = 20;
const TARGETS: TargetId[] = [
  "direct",
  "floor",
  "floor_js",
  "pulsegate",
  "pulsegate_no_history",
  "portkey",
];
const ZERO_DELAY_TARGETS: TargetId[] = ["floor", "pulsegate"];

/** What one sweep runs: which fake route, under which bound. */
interface SweepSpec {
  mode: FakeMode;
  boundMs: number;
}

async function level(
  ctx: BenchContext,
  opts: { target: TargetId; concurrency: number; spec: SweepSpec },
): Promise<ThroughputLevel> {
  const { target, concurrency } = opts;
  const p = ctx.profile.throughput;
  const proxy = ctx.stack.proxies[target];
  const control = ctx.stack.controls[target];
  if (control) await resetGatewayStats(control);
  const cpuBefore = proxy ? await proxy.cpuMs() : 0;
  const run = await autocannon(ctx, {
    request: requestFor(target, { endpoints: ctx.stack.endpoints, mode: opts.spec.mode }),
    connections: concurrency,
    seconds: p.seconds,
    warmupSeconds: p.warmupSeconds,
  });
  const cpuMs = proxy ? (await proxy.cpuMs()) - cpuBefore : null;
  const stats = control ? await gatewayStats(control) : null;
  return {
    concurrency,
    rps: round(run.rps, 1),
    p50Ms: run.p50Ms,
    p99Ms: run.p99Ms,
    errors: run.errors,
    cpuUsPerRequest: cpuMs !== null && run.requests > 0
      ? round((cpuMs * 1000) / run.requests, 1)
      : null,
    // A stopped probe (the zero-delay sweep) reports no tick: no stall figure, not a 0.
    maxStallMs: stats?.probe?.ticks ? round(stats.probe.maxStallMs, 2) : null,
    retried: false,
  };
}

/** Whether a level held the bound: p99 under it and no error. */
export function holds(l: ThroughputLevel, boundMs = BOUND_MS): boolean {
  return l.p99Ms < boundMs && l.errors === 0;
}

/**
 * A level is retried once when it is the first to miss the bound: a neighbour's burst on the
 * shared machine can push one 3 s run over, and interference only ever makes a run worse, so
 * the better of two runs is the fairer figure for every target alike.
 */
async function levelWithRetry(
  ctx: BenchContext,
  opts: { target: TargetId; concurrency: number; spec: SweepSpec; previousHeld: boolean },
): Promise<ThroughputLevel> {
  const first = await level(ctx, opts);
  const bound = opts.spec.boundMs;
  if (holds(first, bound) || !opts.previousHeld) return first;
  const again = { ...(await level(ctx, opts)), retried: true };
  return holds(again, bound) || again.p99Ms < first.p99Ms ? again : { ...first, retried: true };
}

export function bestLevel(levels: ThroughputLevel[], boundMs = BOUND_MS): ThroughputLevel | null {
  const ok = levels.filter((l) => holds(l, boundMs));
  return ok.reduce<ThroughputLevel | null>(
    (best, l) => (!best || l.rps > best.rps ? l : best),
    null,
  );
}

/**
 * Every level for every target, levels the outer loop and the target order rotating per level.
 * With `stopAtMiss` a target runs no level past its first miss (after its retry).
 */
async function sweep(
  ctx: BenchContext,
  opts: { targets: TargetId[]; levels: number[]; spec: SweepSpec; stopAtMiss: boolean },
): Promise<Map<TargetId, ThroughputLevel[]>> {
  const { targets, spec } = opts;
  const levels = new Map<TargetId, ThroughputLevel[]>(targets.map((t) => [t, []]));
  for (const [i, concurrency] of opts.levels.entries()) {
    const order = targets.map((_, k) => targets[(k + i) % targets.length]!);
    for (const target of order) {
      const previous = levels.get(target)!.at(-1);
      const previousHeld = previous === undefined || holds(previous, spec.boundMs);
      if (opts.stopAtMiss && !previousHeld) continue;
      const result = await levelWithRetry(ctx, { target, concurrency, spec, previousHeld });
      levels.get(target)!.push(result);
      ctx.log(
        `throughput ${spec.mode} c=${concurrency} ${target}: ${result.rps} req/s, p99 ` +
          `${result.p99Ms} ms, ${result.errors} errors, ${
            result.cpuUsPerRequest ?? "-"
          } µs CPU/req`,
      );
    }
  }
  return levels;
}

function rowsOf(
  levels: Map<TargetId, ThroughputLevel[]>,
  opts: { boundMs: number; rss?: Map<TargetId, number> },
): ThroughputRow[] {
  return [...levels].map(([target, list]) => {
    const mine = list.sort((a, b) => a.concurrency - b.concurrency);
    const best = bestLevel(mine, opts.boundMs);
    return {
      target,
      label: TARGET_LABELS[target],
      levels: mine,
      bestRps: best?.rps ?? 0,
      bestConcurrency: best?.concurrency ?? null,
      rssAfterMiB: opts.rss ? opts.rss.get(target) ?? null : null,
    };
  });
}

/** Requests/s at p99 under 20 ms against the zero-delay fake, the floor and pulsegate only. */
async function zeroDelaySweep(ctx: BenchContext): Promise<ThroughputSweep> {
  const p = ctx.profile.throughput;
  const levels = await sweep(ctx, {
    targets: running(ctx, ZERO_DELAY_TARGETS),
    levels: p.zeroDelayConcurrency,
    spec: { mode: "zero", boundMs: ZERO_DELAY_BOUND_MS },
    stopAtMiss: true,
  });
  return {
    upstreamDelayMs: 0,
    boundMs: ZERO_DELAY_BOUND_MS,
    secondsPerLevel: p.seconds,
    rows: rowsOf(levels, { boundMs: ZERO_DELAY_BOUND_MS }),
  };
}

export async function throughput(ctx: BenchContext): Promise<ThroughputResult> {
  const p = ctx.profile.throughput;
  await setProbes(ctx, true);
  let levels: Map<TargetId, ThroughputLevel[]>;
  try {
    levels = await sweep(ctx, {
      targets: running(ctx, TARGETS),
      levels: p.concurrency,
      spec: { mode: "delay20", boundMs: BOUND_MS },
      stopAtMiss: false,
    });
  } finally {
    await setProbes(ctx, false);
  }
  const rss = new Map<TargetId, number>();
  for (const target of levels.keys()) {
    const proxy = ctx.stack.proxies[target];
    if (proxy) rss.set(target, round((await proxy.rssBytes()) / 2 ** 20, 1));
  }
  return {
    upstreamDelayMs: UPSTREAM_DELAY_MS,
    boundMs: BOUND_MS,
    secondsPerLevel: p.seconds,
    rows: rowsOf(levels, { boundMs: BOUND_MS, rss }),
    skipped: ctx.stack.skipped.filter((s) => TARGETS.includes(s.target)),
    zeroDelay: await zeroDelaySweep(ctx),
  };
}
