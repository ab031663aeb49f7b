/**
 * The cost targets, as ratios in the same run: CPU per whole answer to the floor's and per
 * streamed delta to the JS relay floor's (scenario 6), the streaming gap (scenario 3), and
 * resident memory after the throughput run (scenario 2). Where the floor is the reference, the
 * JS relay floor says how much of the gap any relay that reads each chunk in JavaScript pays on
 * this runtime.
 */
import type { CpuCostResult, TargetCheck } from "../results.ts";
import { spreadOf } from "../scenarios/cpu_cost.ts";
import { capital, type Context, fmt, unmeasured } from "./check_parts.ts";
import { cpuAdvice, streamAdvice } from "./profile_notes.ts";

/** How far the JS relay alone is from the floor, and what that leaves pulsegate under `limit`. */
function relayNote(
  a: { floor: number; js: number; gw: number; unit: string; limit: number },
): string {
  const jsRatio = a.js / a.floor;
  const head = `The JS relay floor alone costs ${fmt(jsRatio)}× the floor per ${a.unit} ` +
    `(${fmt(a.js, 1)} vs ${fmt(a.floor, 1)} µs): it reads each chunk in JavaScript and hands ` +
    "Deno.serve a JS stream, which Deno.serve pumps chunk by chunk where the floor hands it the " +
    "fetch body to pipe in Rust.";
  const own = `pulsegate is ${fmt(a.gw / a.js)}× the JS relay: ${fmt(a.gw - a.js, 1)} µs per ` +
    `${a.unit} is its own work beyond reading and re-sending each chunk.`;
  return jsRatio >= a.limit
    ? `${head} So ${a.limit}× the floor is out of reach of any relay that reads each chunk in ` +
      `JavaScript on this runtime; ${own}`
    : `${head} That leaves ${fmt(a.limit * a.floor - a.js, 1)} µs per ${a.unit} for a relay's ` +
      `own work under ${a.limit}×; ${own}`;
}

/** What pulsegate does beyond the JS relay, when the JS relay is the reference. */
function beyondRelay(a: { js: number; gw: number; unit: string; limit: number }): string {
  return `pulsegate spends ${fmt(a.gw - a.js, 1)} µs per ${a.unit} beyond the JS relay's ` +
    `${fmt(a.js, 1)} µs (which reads each chunk in JavaScript and hands Deno.serve a stream of ` +
    `its own, and does nothing else); ${a.limit}× it leaves ${fmt((a.limit - 1) * a.js, 1)} µs ` +
    "for pulsegate's own work.";
}

type Row = CpuCostResult["rows"][number];
type Reference = "floor" | "floor_js";
const REFERENCE_NAME: Record<Reference, string> = {
  floor: "the floor's",
  floor_js: "the JS relay floor's",
};

function cpuCheck(
  ctx: Context,
  f: {
    id: string;
    target: string;
    key: "usPerDelta" | "usPerRequest";
    unit: string;
    /** At most `limit` times `against`'s median. */
    limit: number;
    against: Reference;
  },
): TargetCheck {
  const s = ctx.scenarios.cpuCost;
  const by = (t: string): Row | undefined => s?.rows.find((r) => r.target === t);
  const floor = by("floor");
  const gw = by("pulsegate");
  const js = by("floor_js");
  if (!s || !floor || !gw) return unmeasured(f.id, f.target, "scenario 6 did not run");
  if (f.against === "floor_js" && !js) {
    return unmeasured(f.id, f.target, "the JS relay floor did not run");
  }
  const fm = spreadOf(floor[f.key]).median;
  const g = spreadOf(gw[f.key]);
  const jm = js ? spreadOf(js[f.key]).median : NaN;
  const ref = f.against === "floor" ? fm : jm;
  const ratio = g.median / ref;
  const met = ratio <= f.limit;
  const profile = f.key === "usPerDelta" ? streamAdvice(ctx.hotStream) : cpuAdvice(ctx.hot);
  const other = f.against === "floor"
    ? (js ? `; JS relay floor ${fmt(jm, 1)} µs (${fmt(jm / fm)}×)` : "")
    : `; the floor ${fmt(fm, 1)} µs (pulsegate ${fmt(g.median / fm)}× it)`;
  const note = f.against === "floor"
    ? (js ? relayNote({ floor: fm, js: jm, gw: g.median, unit: f.unit, limit: f.limit }) : "")
    : beyondRelay({ js: jm, gw: g.median, unit: f.unit, limit: f.limit });
  return {
    id: f.id,
    target: f.target,
    measured: `${fmt(g.median, 1)} µs (${fmt(g.min, 1)}–${fmt(g.max, 1)}) vs ` +
      `${REFERENCE_NAME[f.against]} ${fmt(ref, 1)} µs: ${fmt(ratio)}× over ${s.reps} ` +
      `repetitions${other}`,
    met,
    gap: met ? "" : `missed by ${fmt(ratio - f.limit)}× (needs ${fmt(f.limit * ref, 1)} µs, ` +
      `${fmt(g.median - f.limit * ref, 1)} µs over)`,
    closeWith: met ? "" : [note, profile].filter(Boolean).join(" "),
  };
}

export function streamGapCheck(ctx: Context): TargetCheck {
  const s = ctx.scenarios.streaming;
  const gw = s.rows.find((r) => r.target === "pulsegate");
  const direct = s.rows.find((r) => r.target === "direct");
  const target = "streaming: added gap p99 under 1 ms";
  if (!gw || !direct || gw.complete === 0) {
    return unmeasured("stream_gap", target, "pulsegate's streams did not complete");
  }
  const added = gw.addedGapMs.p99 - direct.addedGapMs.p99;
  const met = added < 1;
  const floorCpu = s.rows.find((r) => r.target === "floor")?.cpuUsPerDelta ?? NaN;
  return {
    id: "stream_gap",
    target,
    measured: `p99 added gap ${fmt(gw.addedGapMs.p99, 3)} ms through pulsegate vs ` +
      `${fmt(direct.addedGapMs.p99, 3)} ms direct: ${fmt(added, 3)} ms added`,
    met,
    gap: met ? "" : `missed by ${fmt(added - 1, 3)} ms`,
    closeWith: met ? "" : `Per delta pulsegate spends ${fmt(gw.cpuUsPerDelta ?? NaN, 0)} µs of ` +
      `CPU where the floor spends ${fmt(floorCpu, 0)} µs (scenario 3). ` +
      streamAdvice(ctx.hotStream),
  };
}

/** Resident memory right after scenario 2, pulsegate against the floor. */
export function rssCheck(ctx: Context): TargetCheck {
  const target = "resident memory after the throughput run at most 1.5× the floor's";
  const s = ctx.scenarios.throughput;
  const rss = (t: string) => s.rows.find((r) => r.target === t)?.rssAfterMiB ?? null;
  const gw = rss("pulsegate");
  const floor = rss("floor");
  if (gw === null || floor === null) {
    return unmeasured("rss_throughput", target, "no RSS was read after the throughput run");
  }
  const ratio = gw / floor;
  const met = ratio <= 1.5;
  const js = rss("floor_js");
  const off = rss("pulsegate_no_history");
  return {
    id: "rss_throughput",
    target,
    measured: `${fmt(gw, 1)} vs ${fmt(floor, 1)} MiB: ${fmt(ratio)}×` +
      (js === null ? "" : `; JS relay floor ${fmt(js, 1)} MiB`) +
      (off === null ? "" : `; pulsegate with history off ${fmt(off, 1)} MiB`),
    met,
    gap: met ? "" : `missed by ${fmt(ratio - 1.5)}× (needs ${fmt(1.5 * floor, 0)} MiB, ` +
      `${fmt(gw - 1.5 * floor, 0)} MiB over)`,
    closeWith: met ? "" : rssAdvice(ctx, { gw, floor, off }),
  };
}

/** How much of the gap a fresh process has before any request (scenario 4's baselines). */
function rssAdvice(ctx: Context, a: { gw: number; floor: number; off: number | null }): string {
  const held = ctx.scenarios.heldStreams.rows;
  const fresh = (t: string) =>
    Math.min(...held.filter((r) => r.target === t).map((r) => r.rssBeforeMiB));
  const gwIdle = fresh("pulsegate");
  const floorIdle = fresh("floor");
  const parts: string[] = [];
  if (Number.isFinite(gwIdle) && Number.isFinite(floorIdle)) {
    const atRest = gwIdle - floorIdle;
    parts.push(
      `A fresh pulsegate process holds ${fmt(gwIdle, 1)} MiB before its first request and a ` +
        `fresh floor ${fmt(floorIdle, 1)} MiB (scenario 4's baselines): ${fmt(atRest, 0)} MiB ` +
        "of the gap is there at rest (the gateway's code and modules, libSQL and the history " +
        `writer's worker thread), ${fmt(a.gw - a.floor - atRest, 0)} MiB grows under load.`,
    );
  }
  if (a.off !== null) {
    const d = a.gw - a.off;
    parts.push(
      `With history off pulsegate ends the run at ${fmt(a.off, 1)} MiB, ` +
        `${fmt(Math.abs(d), 0)} MiB ${d >= 0 ? "less" : "more"} than with it on` +
        (Math.abs(d) < 0.1 * a.gw ? ", so history is not what holds the memory." : "."),
    );
  }
  return capital(parts.join(" "));
}

export function cpuDeltaCheck(ctx: Context): TargetCheck {
  return cpuCheck(ctx, {
    id: "cpu_delta",
    target: "CPU per streamed delta at most 1.1× the JS relay floor's",
    key: "usPerDelta",
    unit: "delta",
    limit: 1.1,
    against: "floor_js",
  });
}

export function cpuRequestCheck(ctx: Context): TargetCheck {
  return cpuCheck(ctx, {
    id: "cpu_request",
    target: "whole answers: CPU per request at most 2× the floor's",
    key: "usPerRequest",
    unit: "whole answer",
    limit: 2,
    against: "floor",
  });
}
