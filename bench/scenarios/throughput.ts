/**
 * Scenario 2: the most requests/s each target holds with p99 under 50 ms and no error, against a
 * fake that answers after 20 ms, at concurrency 1 to 256. Levels are the outer loop and the
 * target order rotates per level, so no target gets the machine's quiet (or busy) minute. Each
 * proxy's resident memory is read once the last level is done (the targets compare pulsegate's to
 * the floor's).
 */
import { autocannon } from "../autocannon.ts";
import {
  type BenchContext,
  gatewayStats,
  resetGatewayStats,
  running,
  setProbes,
} from "../context.ts";
import type { ThroughputLevel, ThroughputResult, ThroughputRow } from "../results.ts";
import { round } from "../stats.ts";
import { requestFor, TARGET_LABELS, type TargetId } from "../targets.ts";

export const BOUND_MS = 50;
const UPSTREAM_DELAY_MS = 20;
const TARGETS: TargetId[] = [
  "direct",
  "floor",
  "floor_js",
  "pulsegate",
  "pulsegate_no_history",
  "portkey",
];

async function level(
  ctx: BenchContext,
  opts: { target: TargetId; concurrency: number },
): Promise<ThroughputLevel> {
  const { target, concurrency } = opts;
  const p = ctx.profile.throughput;
  const proxy = ctx.stack.proxies[target];
  const control = ctx.stack.controls[target];
  if (control) await resetGatewayStats(control);
  const cpuBefore = proxy ? await proxy.cpuMs() : 0;
  const run = await autocannon(ctx, {
    request: requestFor(target, { endpoints: ctx.stack.endpoints, mode: "delay20" }),
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
    maxStallMs: stats?.probe ? round(stats.probe.maxStallMs, 2) : null,
    retried: false,
  };
}

const holds = (l: ThroughputLevel) => l.p99Ms < BOUND_MS && l.errors === 0;

/**
 * A level is retried once when it is the first to miss the bound: a neighbour's burst on the
 * shared machine can push one 3 s run over, and interference only ever makes a run worse, so
 * the better of two runs is the fairer figure for every target alike.
 */
async function levelWithRetry(
  ctx: BenchContext,
  opts: { target: TargetId; concurrency: number; previousHeld: boolean },
): Promise<ThroughputLevel> {
  const first = await level(ctx, opts);
  if (holds(first) || !opts.previousHeld) return first;
  const again = { ...(await level(ctx, opts)), retried: true };
  return holds(again) || again.p99Ms < first.p99Ms ? again : { ...first, retried: true };
}

export function bestLevel(levels: ThroughputLevel[]): ThroughputLevel | null {
  const ok = levels.filter(holds);
  return ok.reduce<ThroughputLevel | null>(
    (best, l) => (!best || l.rps > best.rps ? l : best),
    null,
  );
}

export async function throughput(ctx: BenchContext): Promise<ThroughputResult> {
  const p = ctx.profile.throughput;
  const targets = running(ctx, TARGETS);
  const levels = new Map<TargetId, ThroughputLevel[]>(targets.map((t) => [t, []]));
  await setProbes(ctx, true);
  try {
    for (const [i, concurrency] of p.concurrency.entries()) {
      const order = targets.map((_, k) => targets[(k + i) % targets.length]!);
      for (const target of order) {
        const previous = levels.get(target)!.at(-1);
        const result = await levelWithRetry(ctx, {
          target,
          concurrency,
          previousHeld: previous === undefined || holds(previous),
        });
        levels.get(target)!.push(result);
        ctx.log(
          `throughput c=${concurrency} ${target}: ${result.rps} req/s, p99 ${result.p99Ms} ms, ` +
            `${result.errors} errors, ${result.cpuUsPerRequest ?? "-"} µs CPU/req`,
        );
      }
    }
  } finally {
    await setProbes(ctx, false);
  }
  const rss = new Map<TargetId, number>();
  for (const target of targets) {
    const proxy = ctx.stack.proxies[target];
    if (proxy) rss.set(target, round((await proxy.rssBytes()) / 2 ** 20, 1));
  }
  const rows: ThroughputRow[] = targets.map((target) => {
    const mine = levels.get(target)!.sort((a, b) => a.concurrency - b.concurrency);
    const best = bestLevel(mine);
    return {
      target,
      label: TARGET_LABELS[target],
      levels: mine,
      bestRps: best?.rps ?? 0,
      bestConcurrency: best?.concurrency ?? null,
      rssAfterMiB: rss.get(target) ?? null,
    };
  });
  return {
    upstreamDelayMs: UPSTREAM_DELAY_MS,
    boundMs: BOUND_MS,
    secondsPerLevel: p.seconds,
    rows,
    skipped: ctx.stack.skipped.filter((s) => TARGETS.includes(s.target)),
  };
}
