/**
 * The targets, checked against one run's figures. Each says met or missed, by how much,
 * and, when missed, what the measurements point at to close it.
 */
import type {
  AddedLatencyResult,
  BenchResults,
  HeldResult,
  HistoryResult,
  HotPathProfile,
  HotSpot,
  Machine,
  StreamingResult,
  TargetCheck,
  ThroughputResult,
  ThroughputRow,
} from "../results.ts";
import { round } from "../stats.ts";
import { spreadOf } from "../scenarios/cpu_cost.ts";
import type { TargetId } from "../targets.ts";

type Scenarios = BenchResults["scenarios"];

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? round(n, digits).toString() : "n/a");

function unmeasured(id: string, target: string, why: string): TargetCheck {
  return { id, target, measured: "not measured", met: null, gap: why, closeWith: "" };
}

/** A share of the serving thread's profile: names matching `pattern`, summed. */
function shareOf(list: HotSpot[], pattern: RegExp): number {
  return list.filter((h) => pattern.test(h.name)).reduce((a, h) => a + h.selfPercent, 0);
}

/** The same in words; a name below the profile's listed top is "under" its last share. */
function shareText(list: HotSpot[], pattern: RegExp): string {
  const sum = shareOf(list, pattern);
  if (sum > 0) return `${fmt(sum, 1)} %`;
  return `under ${fmt(list.at(-1)?.selfPercent ?? 0, 1)} %`;
}

function latencyChecks(s: AddedLatencyResult, opts: Context): TargetCheck[] {
  const floor = s.rows.find((r) => r.target === "floor");
  const gw = s.rows.find((r) => r.target === "pulsegate");
  const off = s.rows.find((r) => r.target === "pulsegate_no_history");
  const target = "added latency p50 within 0.3 ms and p99 within 1 ms of the floor";
  if (!floor || !gw) return [unmeasured("latency", target, "floor or pulsegate did not run")];
  const d50 = gw.latencyMs.p50 - floor.latencyMs.p50;
  const d99 = gw.latencyMs.p99 - floor.latencyMs.p99;
  const met = d50 <= 0.3 && d99 <= 1;
  const misses = [
    d50 > 0.3 ? `p50 by ${fmt(d50 - 0.3, 3)} ms` : "",
    d99 > 1 ? `p99 by ${fmt(d99 - 1, 3)} ms` : "",
  ].filter(Boolean);
  return [{
    id: "latency",
    target,
    measured: `pulsegate − floor: p50 ${fmt(d50, 3)} ms, p99 ${fmt(d99, 3)} ms`,
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
    `${cpuVsFloor(tp)}. Where it goes and what is left to cut is under the 0.8× floor target.`,
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

/** Pulsegate's CPU per request at its best level against the floor's at the same level. */
function cpuVsFloor(s: ThroughputResult): string {
  const gw = row(s, "pulsegate");
  const c = gw?.bestConcurrency ?? null;
  if (c === null) return "";
  return `at concurrency ${c}, its best level in scenario 2, pulsegate spends ` +
    `${fmt(cpuAtBest(gw), 0)} µs of CPU per request and the floor ` +
    `${fmt(cpuAt(row(s, "floor"), c), 0)} µs`;
}

/**
 * History's share of the serving thread's profile: building and queuing rows (db/), and
 * posting them to the worker (structured clone and the message op).
 */
function historyShare(hot: HotPathProfile): string {
  return shareText(
    hot.byFunction,
    /\(db\/|libsql|^op_host_post_message|^serialize \(ext:core/,
  );
}

/** What the serving thread's profile says is left on the whole-answer path, with its shares. */
function cpuAdvice(hot: HotPathProfile | null): string {
  if (!hot) return "";
  const f = hot.byFile;
  const requests = shareOf(f, /23_request/) + shareOf(hot.byFunction, /^buildRequest /);
  const fetchRest = shareOf(f, /deno_fetch|op_fetch/) - shareOf(f, /23_request/);
  return `The whole-answer profile (below): Web Streams ${shareText(f, /06_streams/)} (reader ` +
    `releases, each building an error object, ${shareText(hot.byFunction, /Reader\w*Release/)}); ` +
    `Request objects ${fmt(requests, 1)} %; the rest of fetch ${fmt(fetchRest, 1)} %, which ` +
    `the floor pays too; building, queuing and posting history rows ${historyShare(hot)}; GC ` +
    `${shareText(f, /garbage/)}. Fetch is handed a url and init (each adapter's \`buildPost\`), ` +
    "and the answer is read into one reused buffer (gateway/forward/body_reader.ts); what is " +
    "left is the stream machinery of the answer's body and of Deno.serve, history, and GC.";
}

/** Whether the first level over the bound was CPU-bound or lost to its tail. */
function firstMiss(r: ThroughputRow, boundMs: number): string {
  const best = r.levels.findIndex((l) => l.concurrency === r.bestConcurrency);
  const next = r.levels[best + 1];
  if (!next || next.cpuUsPerRequest === null || next.errors > 0 || next.p99Ms < boundMs) {
    return "";
  }
  const busy = (next.rps * next.cpuUsPerRequest) / 1e6;
  return ` At concurrency ${next.concurrency}, the first level past it, the process kept ` +
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
      `${fmt(on.rowsPerRequest, 2)} rows were written per request. To close: write a ` +
        "request's open rows only if it is still running after a second (crash recovery needs " +
        "no more), so a short request costs two rows (its closed request and its attempt), " +
        `${fmt((1 - 2 / on.rowsPerRequest) * 100, 0)} % fewer for the worker to write and the ` +
        "serving thread to build.",
    );
  }
  return parts.join(" ");
}

function portkeyAdvice(s: ThroughputResult, portkeyRps: number): string {
  const off = row(s, "pulsegate_no_history");
  if (!off || off.bestRps < 3 * portkeyRps) {
    return "See the floor target: the same CPU per request closes both.";
  }
  return `With history off pulsegate holds ${fmt(off.bestRps, 0)} req/s, ` +
    `${fmt(off.bestRps / portkeyRps)}× Portkey's: closing the history cost (below) closes this.`;
}

const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

function throughputChecks(s: ThroughputResult, opts: Context): TargetCheck[] {
  const { hot } = opts;
  const gw = row(s, "pulsegate");
  const floor = row(s, "floor");
  const portkey = row(s, "portkey");
  const checks: TargetCheck[] = [];
  const vsPortkey = "throughput at the bound at least 3× Portkey's";
  if (!gw || !portkey) {
    checks.push(unmeasured("throughput_portkey", vsPortkey, "Portkey did not run"));
  } else if (portkey.bestRps === 0) {
    checks.push({
      id: "throughput_portkey",
      target: vsPortkey,
      measured: `${fmt(gw.bestRps, 0)} req/s vs none: Portkey held no level under the bound`,
      met: gw.bestRps > 0,
      gap: gw.bestRps > 0 ? "" : "neither held a level under the bound",
      closeWith: "",
    });
  } else {
    const ratio = gw.bestRps / portkey.bestRps;
    checks.push({
      id: "throughput_portkey",
      target: vsPortkey,
      measured: `${fmt(gw.bestRps, 0)} vs ${fmt(portkey.bestRps, 0)} req/s: ${fmt(ratio)}×`,
      met: ratio >= 3,
      gap: ratio >= 3
        ? ""
        : `missed by ${fmt(3 - ratio)}× (needs ${fmt(3 * portkey.bestRps, 0)} req/s)`,
      closeWith: ratio >= 3 ? "" : portkeyAdvice(s, portkey.bestRps),
    });
  }
  const vsFloor = "throughput at the bound at least 0.8× the floor's";
  if (!gw || !floor) {
    checks.push(unmeasured("throughput_floor", vsFloor, "floor or pulsegate did not run"));
  } else {
    const ratio = gw.bestRps / floor.bestRps;
    const floorCpu = cpuAtBest(floor);
    checks.push({
      id: "throughput_floor",
      target: vsFloor,
      measured: `${fmt(gw.bestRps, 0)} vs ${fmt(floor.bestRps, 0)} req/s: ${fmt(ratio)}×`,
      met: ratio >= 0.8,
      gap: ratio >= 0.8
        ? ""
        : `missed by ${fmt(0.8 - ratio)}× (needs ${fmt(0.8 * floor.bestRps, 0)} req/s)`,
      closeWith: ratio >= 0.8 ? "" : `${capital(cpuVsFloor(s))}; the floor spends ` +
        `${fmt(floorCpu, 0)} µs at its own best (concurrency ${floor.bestConcurrency}), and 0.8× ` +
        `its throughput needs about ${fmt(floorCpu / 0.8, 0)} µs per request.` +
        `${firstMiss(gw, s.boundMs)} ` + cpuAdvice(hot),
    });
  }
  const history = "history on costs under 10 % of that throughput";
  const off = row(s, "pulsegate_no_history");
  if (!gw || !off) {
    checks.push(unmeasured("history_cost", history, "pulsegate with history off did not run"));
  } else {
    const cost = 1 - gw.bestRps / off.bestRps;
    const cpuOn = cpuAtBest(gw);
    const cpuOff = cpuAtBest(off);
    checks.push({
      id: "history_cost",
      target: history,
      measured: `${fmt(gw.bestRps, 0)} on vs ${fmt(off.bestRps, 0)} req/s off: ` +
        `${fmt(cost * 100, 1)} % (CPU ${fmt(cpuOn, 0)} vs ${fmt(cpuOff, 0)} µs/request)`,
      met: cost < 0.1,
      gap: cost < 0.1 ? "" : `missed by ${fmt((cost - 0.1) * 100, 1)} points`,
      closeWith: cost < 0.1
        ? ""
        : historyAdvice(opts.scenarios.historyWrites, { hot, on: gw, off }),
    });
  }
  return checks;
}

function streamingChecks(s: StreamingResult, opts: Context): TargetCheck[] {
  const gw = s.rows.find((r) => r.target === "pulsegate");
  const direct = s.rows.find((r) => r.target === "direct");
  const target = "streaming: added per-chunk gap p99 under 0.2 ms";
  if (!gw || !direct || gw.complete === 0) {
    return [unmeasured("stream_gap", target, "pulsegate's streams did not complete")];
  }
  const added = gw.addedGapMs.p99 - direct.addedGapMs.p99;
  const met = added < 0.2;
  const floorCpu = s.rows.find((r) => r.target === "floor")?.cpuUsPerDelta ?? NaN;
  return [{
    id: "stream_gap",
    target,
    measured: `p99 added gap ${fmt(gw.addedGapMs.p99, 3)} ms through pulsegate vs ` +
      `${fmt(direct.addedGapMs.p99, 3)} ms direct: ${fmt(added, 3)} ms added`,
    met,
    gap: met ? "" : `missed by ${fmt(added - 0.2, 3)} ms`,
    closeWith: met ? "" : `Per delta pulsegate spends ${fmt(gw.cpuUsPerDelta ?? NaN, 0)} µs of ` +
      `CPU where the floor spends ${fmt(floorCpu, 0)} µs. ` + streamAdvice(opts.hotStream),
  }];
}

/** What the streams profile says, and the one known cause left on that path. */
function streamAdvice(hot: HotPathProfile | null): string {
  const cut =
    "A plain Chat text delta is no longer parsed (gateway/formats/openai_chat/stream.ts " +
    "`quickChat`), and one upstream read is one write to the client; what is left is the stream " +
    "machinery: the upstream body's reader and the client's stream, which Deno.serve pumps " +
    "chunk by chunk in JavaScript (the floor hands its fetch body to Deno.serve whole).";
  if (!hot) return cut;
  const json = shareOf(hot.byFunction, /^parseJson /) +
    shareOf(hot.byFile, /openai_chat\/(stream|pulse)\.ts/);
  const sse = shareOf(hot.byFile, /sse_stream\.ts|sse_frames\.ts/) -
    shareOf(hot.byFunction, /^parseJson /);
  const streams = shareOf(hot.byFile, /06_streams/);
  const gc = shareOf(hot.byFile, /garbage/);
  return `In the streams profile (below) Web Streams take ${fmt(streams, 1)} % and GC ` +
    `${fmt(gc, 1)} %; splitting SSE ${fmt(sse, 1)} %, parsing and reading each delta's JSON ` +
    `${fmt(json, 1)} %. ${cut}` +
    "";
}

function heldAdvice(s: HeldResult, r: HeldResult["rows"][number]): string {
  const floor = s.rows.find((x) => x.target === "floor");
  const kib = (b: number | null | undefined) => `${fmt((b ?? NaN) / 1024, 1)} KiB`;
  const rest = r.bytesPerStream - (r.heapBytesPerStream ?? 0) - (r.externalBytesPerStream ?? 0);
  return (floor
    ? `The floor itself holds a stream for ${kib(floor.bytesPerStream)} here (Deno's fetch + ` +
      `serve, a socket pair), so 40 KiB is below what this runtime's fetch costs at all. `
    : "") +
    `Of pulsegate's ${kib(r.bytesPerStream)}: ${kib(r.externalBytesPerStream)} is external ` +
    `memory, mostly the buffer a pending read holds (16 KiB, reused: ` +
    `gateway/forward/body_reader.ts; Deno's own reads allocate 64 KiB each); ` +
    `${kib(r.heapBytesPerStream)} is JS heap (each stream's request, hop, ` +
    `timers and its client stream); the other ${kib(rest)} is native (sockets, buffers) ` +
    `and heap slack.`;
}

function heldChecks(s: HeldResult): TargetCheck[] {
  const target = "5,000 held streams with no lost frame and under 40 KB (40 KiB) per stream";
  const r = s.rows.filter((x) => x.target === "pulsegate").sort((a, b) => b.count - a.count)[0];
  if (!r) return [unmeasured("held", target, "no held-stream run through pulsegate")];
  const limit = 40 * 1024;
  const complete = r.lostDeltas === 0 && r.completeStreams === r.count;
  const small = r.bytesPerStream < limit;
  const full = r.count >= 5_000;
  const met = complete && small && full;
  const misses = [
    full ? "" : `ran ${r.count} streams, not 5,000`,
    complete
      ? ""
      : `${r.lostDeltas} deltas lost, ${r.count - r.completeStreams} streams incomplete`,
    small ? "" : `${fmt((r.bytesPerStream - limit) / 1024, 1)} KiB per stream over`,
  ].filter(Boolean);
  return [{
    id: "held",
    target,
    measured: `${r.count} streams: ${r.lostDeltas} lost, ${r.lateDeltas} late, ` +
      `${fmt(r.bytesPerStream / 1024, 1)} KiB per stream, in-flight after: ${r.inflightAfter}`,
    met,
    gap: met ? "" : `missed: ${misses.join("; ")}`,
    closeWith: met || small ? "" : heldAdvice(s, r),
  }];
}

/** What every check may quote besides its own scenario. */
interface Context {
  scenarios: Scenarios;
  /** The serving thread's profiles: whole answers, streams. */
  hot: HotPathProfile | null;
  hotStream: HotPathProfile | null;
  machine: Machine | null;
}

/** Issue 16: CPU per delta and per whole answer at most 2× the floor's, medians of the repetitions. */
function cpuCostChecks(s: Scenarios["cpuCost"]): TargetCheck[] {
  const figures = [
    ["cpu_delta", "CPU per streamed delta at most 2× the floor's (issue 16)", "usPerDelta"],
    ["cpu_request", "CPU per whole answer at most 2× the floor's (issue 16)", "usPerRequest"],
  ] as const;
  return figures.map(([id, target, key]) => {
    const floor = s?.rows.find((r) => r.target === "floor");
    const gw = s?.rows.find((r) => r.target === "pulsegate");
    if (!s || !floor || !gw) return unmeasured(id, target, "scenario 6 did not run");
    const f = spreadOf(floor[key]).median;
    const g = spreadOf(gw[key]);
    const ratio = g.median / f;
    const met = ratio <= 2;
    return {
      id,
      target,
      measured: `${fmt(g.median, 1)} µs (${fmt(g.min, 1)}–${fmt(g.max, 1)}) vs ${fmt(f, 1)} µs: ` +
        `${fmt(ratio)}× over ${s.reps} repetitions`,
      met,
      gap: met ? "" : `missed by ${fmt(ratio - 2)}× (needs ${fmt(2 * f, 1)} µs)`,
      closeWith: met ? "" : "See the profiles under “Where pulsegate's CPU goes”.",
    };
  });
}

export function checkTargets(
  s: Scenarios,
  opts: Partial<Omit<Context, "scenarios">> = {},
): TargetCheck[] {
  const ctx: Context = {
    scenarios: s,
    hot: opts.hot ?? null,
    hotStream: opts.hotStream ?? null,
    machine: opts.machine ?? null,
  };
  return [
    ...latencyChecks(s.addedLatency, ctx),
    ...throughputChecks(s.throughput, ctx),
    ...streamingChecks(s.streaming, ctx),
    ...heldChecks(s.heldStreams),
    ...cpuCostChecks(s.cpuCost),
  ];
}
