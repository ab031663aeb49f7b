/**
 * Where pulsegate's CPU goes under load: a fresh gateway, a CPU profile taken inside it
 * (bench/self_profiler.ts, through its bench-only control port) while autocannon drives the
 * route, and the samples summed by function and by file. Runs after the scenarios, in its own process, so the
 * profiler's overhead never touches the figures above. It profiles the serving thread only: the
 * history writer's worker thread (a local database's batches) is not in it.
 */
import type { AllocationSummary } from "./alloc_profile.ts";
import { autocannon, type LoadEnv, type LoadRun } from "./autocannon.ts";
import type { HotPathProfile, HotSpot } from "./results.ts";
import { MAIN_ROUTES, REPO_ROOT, startPulsegate } from "./stack.ts";
import { round } from "./stats.ts";
import { gatewayConfig, requestFor } from "./targets.ts";

const SAMPLING_US = 200;

export interface HotPathOptions {
  /** A route of MAIN_ROUTES: `delay20` (whole answers) or `stream64` (streams). */
  route: string;
  stream: boolean;
  history: boolean;
  concurrency: number;
  seconds: number;
  /** How many functions the summary lists (files: 15, or this when more). Default 25. */
  top?: number;
}

export const DEFAULT_HOT_PATH: HotPathOptions = {
  route: "delay20",
  stream: false,
  history: true,
  concurrency: 64,
  seconds: 4,
};

/** The streaming path: 64 deltas 20 ms apart per stream, 32 streams at a time. */
export const STREAM_HOT_PATH: HotPathOptions = {
  route: "stream64",
  stream: true,
  history: true,
  concurrency: 32,
  seconds: 4,
};

export interface ProfileEnv extends LoadEnv {
  fake: string;
  workDir: string;
  log(message: string): void;
}

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

/** A V8 CPU profile as `Profiler.stop` answers it: times in µs on the profiled process's clock. */
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** The profile's nodes with hit counts of only the samples taken `fromUs` after it started. */
export function nodesAfter(profile: CpuProfile, fromUs: number): ProfileNode[] {
  const hits = new Map<number, number>();
  let at = profile.startTime;
  const samples = profile.samples ?? [];
  for (let i = 0; i < samples.length; i++) {
    at += profile.timeDeltas?.[i] ?? 0;
    if (at - profile.startTime < fromUs) continue;
    hits.set(samples[i]!, (hits.get(samples[i]!) ?? 0) + 1);
  }
  return profile.nodes.map((node) => ({ ...node, hitCount: hits.get(node.id) ?? 0 }));
}

/** Repository-relative paths, and npm packages by their own name. */
function shortUrl(url: string): string {
  return url
    .replace(`file://${REPO_ROOT}`, "")
    .replace(/^node_modules\/\.deno\/[^/]+\/node_modules\//, "npm:");
}

function top(totals: Map<string, number>, all: number, count: number): HotSpot[] {
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, hits]) => ({ name, selfPercent: round((100 * hits) / all, 1) }));
}

/** Idle time, and the profiler's own session, are left out of the shares. */
function isProfilerCost(frame: ProfileNode["callFrame"]): boolean {
  return frame.functionName === "(idle)" || /inspector/.test(frame.url + frame.functionName);
}

export function summarizeProfile(
  nodes: ProfileNode[],
  opts: { top?: number } = {},
): Pick<HotPathProfile, "byFunction" | "byFile"> {
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  let all = 0;
  for (const node of nodes) {
    const hits = node.hitCount ?? 0;
    const { functionName, url, lineNumber } = node.callFrame;
    if (!hits || isProfilerCost(node.callFrame)) continue;
    all += hits;
    const file = url ? shortUrl(url) : functionName;
    const fn = url ? `${functionName || "(anonymous)"} (${file}:${lineNumber + 1})` : functionName;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + hits);
    byFile.set(file, (byFile.get(file) ?? 0) + hits);
  }
  const count = opts.top ?? 25;
  return { byFunction: top(byFunction, all, count), byFile: top(byFile, all, Math.max(15, count)) };
}

/**
 * A fresh gateway under `opts`' load: warmed up for 2 s (so what is measured is steady state, not
 * compilation), then `start` on its control port, `opts.seconds` of load, and `stop` with that
 * run. Null, logged as `what` failing, when any of it fails.
 */
async function underLoad<T>(
  env: ProfileEnv,
  opts: HotPathOptions & {
    name: string;
    what: string;
    start: (control: string) => Promise<void>;
    stop: (control: string, run: LoadRun) => Promise<T>;
  },
): Promise<T | null> {
  const gw = await startPulsegate(env.layout, {
    name: opts.name,
    dir: `${env.workDir}/${opts.name}_${opts.route}_${opts.history ? "on" : "off"}`,
    config: gatewayConfig({ fake: env.fake, routes: MAIN_ROUTES }),
    history: opts.history,
  });
  const control = gw.ready.control;
  try {
    if (!control) throw new Error("the gateway gave no control port");
    const request = requestFor("pulsegate", {
      endpoints: { fake: env.fake, pulsegate: gw.url },
      mode: opts.route,
      stream: opts.stream,
    });
    const load = { request, connections: opts.concurrency, warmupSeconds: 0 };
    await autocannon(env, { ...load, seconds: 2 });
    await opts.start(control);
    const run = await autocannon(env, { ...load, seconds: opts.seconds });
    return await opts.stop(control, run);
  } catch (err) {
    env.log(`${opts.what} failed: ${(err as Error).message}`);
    return null;
  } finally {
    await gw.stop();
  }
}

export function profileHotPath(
  env: ProfileEnv,
  opts: HotPathOptions = DEFAULT_HOT_PATH,
): Promise<HotPathProfile | null> {
  return underLoad(env, {
    ...opts,
    name: "pulsegate_profiled",
    what: "hot path profile",
    start: async (control) => {
      await (await fetch(`${control}/profile/start?us=${SAMPLING_US}`, { method: "POST" })).json();
    },
    stop: async (control, run) => {
      const stopped = await (await fetch(`${control}/profile/stop`, { method: "POST" }))
        .json() as { profile: { nodes: ProfileNode[] } };
      // A developer's raw profile, for tools that walk its call tree.
      const dump = Deno.env.get("PROF_DUMP");
      if (dump) await Deno.writeTextFile(dump, JSON.stringify(stopped.profile));
      env.log(
        `hot path profile (${opts.route}): ${
          Math.round(run.rps)
        } req/s under the profiler, ${run.errors} errors`,
      );
      return { ...opts, rps: round(run.rps, 1), ...summarizeProfile(stopped.profile.nodes, opts) };
    },
  });
}

/** Allocations per request on the serving thread, estimated from V8's sampling heap profiler. */
export interface AllocationsPerRequest {
  route: string;
  requests: number;
  rps: number;
  /** One sample per this many bytes allocated, on average. */
  intervalBytes: number;
  samples: number;
  objectsPerRequest: number;
  bytesPerRequest: number;
  /** The sites that allocate most objects, per request. */
  sites: Array<{ name: string; objects: number; bytes: number }>;
}

/**
 * A fresh gateway, warmed up, then `opts.seconds` of load with V8's sampling heap profiler on
 * (collected objects included): what one request allocates, and where. The sampling slows the
 * gateway, so this runs apart from the CPU profile.
 */
export function profileAllocations(
  env: ProfileEnv,
  opts: HotPathOptions & { intervalBytes: number },
): Promise<AllocationsPerRequest | null> {
  return underLoad(env, {
    ...opts,
    name: "pulsegate_allocations",
    what: "allocation profile",
    start: async (control) => {
      const started = await fetch(`${control}/alloc/start?bytes=${opts.intervalBytes}`, {
        method: "POST",
      });
      await started.body?.cancel();
    },
    stop: async (control, run) => {
      const stopped = await fetch(`${control}/alloc/stop?top=${opts.top ?? 25}`, {
        method: "POST",
      });
      const sum = await stopped.json() as AllocationSummary;
      const per = (x: number) => x / Math.max(1, run.requests);
      return {
        route: opts.route,
        requests: run.requests,
        rps: round(run.rps, 1),
        intervalBytes: sum.interval,
        samples: sum.samples,
        objectsPerRequest: round(per(sum.objects), 1),
        bytesPerRequest: round(per(sum.bytes), 0),
        sites: sum.sites.map((site) => ({
          name: site.url ? site.name.replace(site.url, shortUrl(site.url)) : site.name,
          objects: round(per(site.objects), 2),
          bytes: round(per(site.bytes), 0),
        })),
      };
    },
  });
}
