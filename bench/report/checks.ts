/**
 * The targets of docs/benchmarks.md, checked against one run's figures (ratios to the floor in the
 * same run where a floor runs). Each says met or missed, by how much,
 * and, when missed, what the measurements and profiles point at.
 */
import type {
  AddedLatencyResult,
  HistoryResult,
  HotPathProfile,
  TargetCheck,
  ThroughputResult,
  ThroughputRow,
} from "../results.ts";
import type { TargetId } from "../targets.ts";
import { capital, type Context, fmt, type Scenarios, unmeasured } from "./check_parts.ts";
import { cpuDeltaCheck, cpuRequestCheck, rssCheck, streamGapCheck } from "./cost_checks.ts";
import { heldChecks } from "./held_checks.ts";
import { oneCallerChecks } from "./one_caller_checks.ts";
import { cpuAdvice, historyShare } from "./profile_notes.ts";

/** Added latency at one connection, over the floor: p50 and p99 limits in ms. */
const LATENCY_P50_MS = 0.25;
const LATENCY_P99_MS = 1;

function latencyChecks(s: AddedLatencyResult, opts: Context): TargetCheck[] {
  const floor = s.rows.find((r) => r.target === "floor");
  const gw = s.rows.find((r) => r.target === "pulsegate");
  const off = s.rows.find((r) => r.target === "pulsegate_no_history");
  const target = `added latency at one connection: p50 at most ${LATENCY_P50_MS} ms and p99 at ` +
    `most ${LATENCY_P99_MS} ms over the floor`;
  if (!floor || !gw) return [unmeasured("latency", target, "floor or pulsegate did not run")];
  const d50 = gw.latencyMs.p50 - floor.latencyMs.p50;
  const d99 = gw.latencyMs.p99 - floor.latencyMs.p99;
  const met = d50 <= LATENCY_P50_MS && d99 <= LATENCY_P99_MS;
  const misses = [
    d50 > LATENCY_P50_MS ? `p50 by ${fmt(d50 - LATENCY_P50_MS, 3)} ms` : "",
    d99 > LATENCY_P99_MS ? `p99 by ${fmt(d99 - LATENCY_P99_MS, 3)} ms` : "",
  ].filter(Boolean);
  return [{
    id: "latency",
    target,
    measured: `pulsegate − floor: p50 ${fmt(d50, 3)} ms, p99 ${fmt(d99, 3)} ms (pulsegate ` +
      `${fmt(gw.latencyMs.p50, 3)} / ${fmt(gw.latencyMs.p99, 3)} ms, the floor ` +
      `${fmt(floor.latencyMs.p50, 3)} / ${fmt(floor.latencyMs.p99, 3)} ms)`,
    met,
    gap: met ? "" : `missed: ${misses.join(", ")}`,
    closeWith: met ? "" : latencyAdvice({ d99, off, floor, opts }),
  }];
}

function latencyAdvice(a: {
  d99: number;
  off: AddedLatencyResult["rows"][number] | undefined;
  floor: AddedLatencyResult["rows"][number];
  opts: Context;
}): string {
  const tp = a.opts.scenarios.throughput;
  const parts = [
    `One request at a time, the added time is pulsegate's extra work per request: ` +
    `${cpuVsFloor(tp)}. Where it goes and what is left to cut is under the whole-answer ` +
    "throughput target.",
  ];
  if (a.off) {
    const d99off = a.off.latencyMs.p99 - a.floor.latencyMs.p99;
    parts.push(
      `With history off the p99 is ${fmt(d99off, 3)} ms over the floor (${fmt(a.d99, 3)} ms ` +
        (a.d99 - d99off > 0.5
          ? `with it on), so about ${fmt(a.d99 - d99off, 1)} ms of it is history's: its rows ` +
            "are built and posted on the serving thread, and its worker thread shares the " +
            "proxy's one core."
          : "with it on), so history is not what sets this tail."),
    );
  }
  const other = a.opts.machine?.otherLoadPercentOfCore;
  if (other !== undefined && other >= 10) {
    parts.push(
      `Other processes used about ${other} % of a core during the run, unpinned, and land on ` +
        "the tails of every target.",
    );
  }
  return parts.join(" ");
}

function row(s: ThroughputResult, target: TargetId): ThroughputRow | undefined {
  return s.rows.find((r) => r.target === target);
}

/** CPU per request at the busiest level that held the bound, the figure to compare costs by. */
function cpuAtBest(r: ThroughputRow | undefined): number {
  return cpuAt(r, r?.bestConcurrency ?? null);
}

function cpuAt(r: ThroughputRow | undefined, concurrency: number | null): number {
  return r?.levels.find((l) => l.concurrency === concurrency)?.cpuUsPerRequest ?? NaN;
}

/**
 * Pulsegate's CPU per request at its best level (its lowest when none held the bound) against
 * the floor's at the same level.
 */
function cpuVsFloor(s: ThroughputResult): string {
  const gw = row(s, "pulsegate");
  if (!gw?.levels.length) return "pulsegate ran no level in scenario 2";
  const c = gw.bestConcurrency ?? gw.levels[0]!.concurrency;
  const which = gw.bestConcurrency === null
    ? "its lowest level (it held none under the bound)"
    : "its best level";
  return `at concurrency ${c}, ${which} in scenario 2, pulsegate spends ` +
    `${fmt(cpuAt(gw, c), 0)} µs of CPU per request and the floor ` +
    `${fmt(cpuAt(row(s, "floor"), c), 0)} µs`;
}

/** Whether the first level over the bound was CPU-bound or lost to its tail. */
function firstMiss(r: ThroughputRow, boundMs: number): string {
  const best = r.levels.findIndex((l) => l.concurrency === r.bestConcurrency);
  const next = r.levels[best + 1];
  if (!next || next.cpuUsPerRequest === null || next.errors > 0 || next.p99Ms < boundMs) {
    return "";
  }
  const which = best < 0 ? "the lowest level, already over the bound" : "the first level past it";
  const busy = (next.rps * next.cpuUsPerRequest) / 1e6;
  return ` At concurrency ${next.concurrency}, ${which}, the process kept ` +
    `${fmt(busy * 100, 0)} % of its one core busy (p99 ${fmt(next.p99Ms, 0)} ms` +
    (next.maxStallMs === null ? "" : `, serving-thread stall up to ${fmt(next.maxStallMs, 0)} ms`) +
    ").";
}

function historyAdvice(
  h: HistoryResult | null,
  opts: { hot: HotPathProfile | null; on: ThroughputRow; off: ThroughputRow },
): string {
  const parts: string[] = [];
  const on1 = opts.on.bestConcurrency;
  const off1 = opts.off.bestConcurrency;
  if (on1 !== null && off1 !== null && off1 === 2 * on1) {
    parts.push(
      `The best levels are concurrency ${on1} (on) and ${off1} (off): levels double, so ` +
        "missing the bound one level earlier reads as about half the throughput.",
    );
  }
  const on = h?.underLoad.rows.find((r) => r.target === "pulsegate");
  const off = h?.underLoad.rows.find((r) => r.target === "pulsegate_no_history");
  if (on && off && on.cpuUsPerRequest !== null && off.cpuUsPerRequest !== null) {
    const total = on.cpuUsPerRequest - off.cpuUsPerRequest;
    const worker = on.workerCpuUsPerRequest ?? NaN;
    const serving = (on.servingCpuUsPerRequest ?? NaN) - (off.servingCpuUsPerRequest ?? NaN);
    const other = total - worker - serving;
    const db = opts.hot ? `: ${historyShare(opts.hot)} of its whole-answer profile` : "";
    parts.push(
      `Under load (scenario 5) history costs ${fmt(total, 0)} µs of CPU per request ` +
        `(${fmt(on.cpuUsPerRequest, 0)} on vs ${fmt(off.cpuUsPerRequest, 0)} off): ` +
        `${fmt(worker, 0)} µs on the writer's worker thread, which here shares the proxy's one ` +
        `pinned core, ${fmt(serving, 0)} µs more on the serving thread (building and posting ` +
        `rows${db}) and ${fmt(other, 0)} µs on the runtime's other threads. Sharing that core, ` +
        `the serving thread's p99 stall was ${fmt(on.p99StallMs, 1)} ms with history on and ` +
        `${fmt(off.p99StallMs, 1)} ms off (${fmt(on.stallsOver10ms, 0)} vs ` +
        `${fmt(off.stallsOver10ms, 0)} stalls over 10 ms).`,
    );
  }
  if (on && on.rowsPerRequest > 2.05) {
    parts.push(
      `${fmt(on.rowsPerRequest, 2)} rows were written per request where a short request with one ` +
        "hop needs two (its row and its hop's, built once from their final state): rows were " +
        "written open and again closed, which only requests running past the open-row deferral " +
        "(a second) should need.",
    );
  }
  return parts.join(" ");
}

function portkeyAdvice(s: ThroughputResult, portkeyRps: number): string {
  const off = row(s, "pulsegate_no_history");
  if (!off || off.bestRps < 3 * portkeyRps) {
    return "See the whole-answer throughput target: the same CPU per request closes both.";
  }
  return `With history off pulsegate holds ${fmt(off.bestRps, 0)} req/s, ` +
    `${fmt(off.bestRps / portkeyRps)}× Portkey's: closing the history cost (above) closes this.`;
}

function portkeyCheck(s: ThroughputResult): TargetCheck {
  const gw = row(s, "pulsegate");
  const portkey = row(s, "portkey");
  const target = "throughput at the bound at least 3× Portkey's";
  if (!gw || !portkey) return unmeasured("throughput_portkey", target, "Portkey did not run");
  if (portkey.bestRps === 0) {
    return {
      id: "throughput_portkey",
      target,
      measured: `${fmt(gw.bestRps, 0)} req/s vs none: Portkey held no level under the bound`,
      met: gw.bestRps > 0,
      gap: gw.bestRps > 0 ? "" : "neither held a level under the bound",
      closeWith: "",
    };
  }
  const ratio = gw.bestRps / portkey.bestRps;
  return {
    id: "throughput_portkey",
    target,
    measured: `${fmt(gw.bestRps, 0)} vs ${fmt(portkey.bestRps, 0)} req/s: ${fmt(ratio)}×`,
    met: ratio >= 3,
    gap: ratio >= 3
      ? ""
      : `missed by ${fmt(3 - ratio)}× (needs ${fmt(3 * portkey.bestRps, 0)} req/s)`,
    closeWith: ratio >= 3 ? "" : portkeyAdvice(s, portkey.bestRps),
  };
}

/** Whole answers: throughput at the 50 ms bound at least this share of the floor's. */
const FLOOR_SHARE = 0.4;

function floorThroughputCheck(s: ThroughputResult, opts: Context): TargetCheck {
  const gw = row(s, "pulsegate");
  const floor = row(s, "floor");
  const target = `whole answers: throughput at the ${s.boundMs} ms p99 bound at least ` +
    `${FLOOR_SHARE}× the floor's`;
  if (!gw || !floor) {
    return unmeasured("throughput_floor", target, "floor or pulsegate did not run");
  }
  if (floor.bestRps === 0) {
    return unmeasured("throughput_floor", target, "the floor held no level under the bound");
  }
  const ratio = gw.bestRps / floor.bestRps;
  const floorCpu = cpuAtBest(floor);
  const js = row(s, "floor_js");
  const met = ratio >= FLOOR_SHARE;
  return {
    id: "throughput_floor",
    target,
    measured: `${fmt(gw.bestRps, 0)} vs ${fmt(floor.bestRps, 0)} req/s: ${fmt(ratio)}×` +
      (js
        ? `; JS relay floor ${fmt(js.bestRps, 0)} req/s (${fmt(js.bestRps / floor.bestRps)}×)`
        : ""),
    met,
    gap: met ? "" : `missed by ${fmt(FLOOR_SHARE - ratio)}× ` +
      `(needs ${fmt(FLOOR_SHARE * floor.bestRps, 0)} req/s)`,
    closeWith: met ? "" : `${capital(cpuVsFloor(s))}; the floor spends ` +
      `${fmt(floorCpu, 0)} µs at its own best (concurrency ${floor.bestConcurrency}), and ` +
      `${FLOOR_SHARE}× its throughput needs about ${fmt(floorCpu / FLOOR_SHARE, 0)} µs per ` +
      `request.${firstMiss(gw, s.boundMs)} ` + cpuAdvice(opts.hot),
  };
}

/** Requests/s at p99 under 20 ms against the zero-delay fake: reported, no ratio asked. */
function tailBoundCheck(s: ThroughputResult): TargetCheck {
  const z = s.zeroDelay;
  const bound = z?.boundMs ?? 20;
  const target = `requests/s at p99 under ${bound} ms, upstream answering at once: ` +
    "pulsegate's and the floor's (no ratio set)";
  if (!z) return unmeasured("throughput_p99_20ms", target, "this run had no zero-delay sweep");
  const gw = z.rows.find((r) => r.target === "pulsegate");
  const floor = z.rows.find((r) => r.target === "floor");
  if (!gw?.levels.length || !floor?.levels.length) {
    return unmeasured("throughput_p99_20ms", target, "floor or pulsegate did not run");
  }
  const at = (r: ThroughputRow) =>
    r.bestConcurrency === null
      ? `no level held (p99 ${fmt(r.levels[0]!.p99Ms, 0)} ms at concurrency ` +
        `${r.levels[0]!.concurrency})`
      : `${fmt(r.bestRps, 0)} req/s at concurrency ${r.bestConcurrency}`;
  const measured = `pulsegate ${at(gw)}, the floor ${at(floor)}` +
    (gw.bestRps > 0 && floor.bestRps > 0 ? `: ${fmt(gw.bestRps / floor.bestRps)}×` : "");
  if (gw.bestConcurrency !== null) {
    return { id: "throughput_p99_20ms", target, measured, met: true, gap: "", closeWith: "" };
  }
  const first = gw.levels[0]!;
  const floorFirst = floor.levels.find((l) => l.concurrency === first.concurrency);
  return {
    id: "throughput_p99_20ms",
    target,
    measured,
    met: false,
    gap: `pulsegate held no level with p99 under ${bound} ms`,
    closeWith: `At concurrency ${first.concurrency}, its lowest level, pulsegate's p99 was ` +
      `${fmt(first.p99Ms, 0)} ms against the zero-delay fake` +
      (floorFirst ? ` (the floor's ${fmt(floorFirst.p99Ms, 0)} ms)` : "") +
      (first.errors > 0 ? ` with ${first.errors} errors` : "") +
      "; the added-latency target says what one request at a time costs.",
  };
}

/** History on costs at most this share of the whole-answer throughput at the bound. */
const HISTORY_SHARE = 0.15;

/** Scenario 5's flat-out figures, one level for both: history's cost without the levels' steps. */
function flatOut(h: HistoryResult | null): string {
  const on = h?.underLoad.rows.find((r) => r.target === "pulsegate");
  const off = h?.underLoad.rows.find((r) => r.target === "pulsegate_no_history");
  if (!on || !off || off.rps <= 0) return "";
  return `; flat out at concurrency ${h!.underLoad.concurrency} on the zero-delay route ` +
    `(scenario 5): ${fmt(on.rps, 0)} vs ${fmt(off.rps, 0)} req/s, ` +
    `${fmt((1 - on.rps / off.rps) * 100, 1)} %`;
}

function historyCheck(s: ThroughputResult, opts: Context): TargetCheck {
  const gw = row(s, "pulsegate");
  const off = row(s, "pulsegate_no_history");
  const target = `history on costs at most ${HISTORY_SHARE * 100} % of the whole-answer ` +
    `throughput at the ${s.boundMs} ms bound`;
  if (!gw || !off) {
    return unmeasured("history_cost", target, "pulsegate with history off did not run");
  }
  if (off.bestRps === 0) {
    return unmeasured("history_cost", target, "with history off pulsegate held no level");
  }
  if (gw.bestConcurrency === null) {
    // No level to compare at: a cost of "100 %" with its CPU "n/a" would read as a figure.
    const first = gw.levels[0];
    return {
      id: "history_cost",
      target,
      measured: `with history on no level held` +
        (first ? ` (p99 ${fmt(first.p99Ms, 0)} ms at concurrency ${first.concurrency})` : "") +
        ` vs ${fmt(off.bestRps, 0)} req/s off` + flatOut(opts.scenarios.historyWrites),
      met: false,
      gap: `with history on pulsegate held no level with p99 under ${s.boundMs} ms`,
      closeWith: historyAdvice(opts.scenarios.historyWrites, { hot: opts.hot, on: gw, off }) ||
        "The throughput rows above say where pulsegate's p99 stood at its lowest level.",
    };
  }
  const cost = 1 - gw.bestRps / off.bestRps;
  const met = cost <= HISTORY_SHARE;
  return {
    id: "history_cost",
    target,
    measured: `${fmt(gw.bestRps, 0)} on vs ${fmt(off.bestRps, 0)} req/s off: ` +
      `${fmt(cost * 100, 1)} % (CPU ${fmt(cpuAtBest(gw), 0)} vs ${fmt(cpuAtBest(off), 0)} ` +
      "µs/request)" + flatOut(opts.scenarios.historyWrites),
    met,
    gap: met ? "" : `missed by ${fmt((cost - HISTORY_SHARE) * 100, 1)} points`,
    closeWith: met
      ? ""
      : historyAdvice(opts.scenarios.historyWrites, { hot: opts.hot, on: gw, off }),
  };
}

/**
 * The targets in the order docs/benchmarks.md gives them.
 */
export function checkTargets(
  s: Scenarios,
  opts: Partial<Omit<Context, "scenarios">> = {},
): TargetCheck[] {
  const ctx: Context = {
    scenarios: s,
    hot: opts.hot ?? null,
    hotStream: opts.hotStream ?? null,
    hotHeld: opts.hotHeld ?? null,
    machine: opts.machine ?? null,
  };
  return [
    // The tail and the gateway's own cost, in the order docs/benchmarks.md states them.
    ...oneCallerChecks(ctx),
    ...latencyChecks(s.addedLatency, ctx),
    tailBoundCheck(s.throughput),
    historyCheck(s.throughput, ctx),
    cpuRequestCheck(ctx),
    floorThroughputCheck(s.throughput, ctx),
    cpuDeltaCheck(ctx),
    ...heldChecks(s.heldStreams, ctx.hotHeld ?? null),
    // Standing targets.
    streamGapCheck(ctx),
    rssCheck(ctx),
    portkeyCheck(s.throughput),
  ];
}
