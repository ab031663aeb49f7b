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
  StreamingResult,
  TargetCheck,
  ThroughputResult,
  ThroughputRow,
} from "../results.ts";
import { round } from "../stats.ts";
import type { TargetId } from "../targets.ts";

type Scenarios = BenchResults["scenarios"];

const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? round(n, digits).toString() : "n/a");

function unmeasured(id: string, target: string, why: string): TargetCheck {
  return { id, target, measured: "not measured", met: null, gap: why, closeWith: "" };
}

function latencyChecks(s: AddedLatencyResult): TargetCheck[] {
  const floor = s.rows.find((r) => r.target === "floor");
  const gw = s.rows.find((r) => r.target === "pulsegate");
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
    closeWith: met ? "" : "The same CPU per request as the throughput target (every µs of work " +
      "on the gateway's one thread is a µs here), plus the tail: history batches run " +
      "synchronously on that thread, so a request that arrives during one waits it out " +
      "(scenario 5's batch times are the p99 floor this sets).",
  }];
}

function row(s: ThroughputResult, target: TargetId): ThroughputRow | undefined {
  return s.rows.find((r) => r.target === target);
}

/** CPU per request at the busiest level that held the bound, the figure to compare costs by. */
function cpuAtBest(r: ThroughputRow | undefined): number {
  const best = r?.levels.find((l) => l.concurrency === r.bestConcurrency);
  return best?.cpuUsPerRequest ?? NaN;
}

/** Sum of the profile's per-file shares whose name matches. */
function share(hot: HotPathProfile | null, pattern: RegExp): string {
  if (!hot) return "n/a";
  const sum = hot.byFile.filter((h) => pattern.test(h.name)).reduce((a, h) => a + h.selfPercent, 0);
  return `${fmt(sum, 1)} %`;
}

function cpuAdvice(hot: HotPathProfile | null): string {
  const where = hot
    ? `The profile below: libSQL history writes ${share(hot, /libsql/)}, Web Streams ` +
      `${share(hot, /06_streams/)}, fetch internals ${share(hot, /deno_fetch|op_fetch/)}, ` +
      `GC ${share(hot, /garbage/)} of the gateway's CPU. `
    : "";
  return where + "To cut: write history from a Worker (db/history_writer.ts; the local libSQL " +
    "driver runs each batch on the serving thread); read the request body with " +
    "`request.arrayBuffer()` when Content-Length is known instead of `for await` over " +
    "`request.body` (gateway/read_body.ts), and the upstream answer without `for await` " +
    "(gateway/whole_forward.ts `readUntilContent`): each loop's reader release builds an error " +
    "object; abort a finished hop with a shared reason instead of a new DOMException " +
    "(gateway/hop.ts `close`); hand fetch a URL and init instead of a Request it copies again " +
    "(gateway/openai_chat/mod.ts `buildRequest`); cache metric label keys (gateway/metrics.ts " +
    "`labelKey`).";
}

function historyAdvice(h: HistoryResult | null): string {
  const on = h?.underLoad.rows.find((r) => r.target === "pulsegate");
  const figures = h && on
    ? `Under load each libSQL batch held the serving thread ${fmt(on.batchMs.p50, 1)} ms ` +
      `(max ${fmt(on.batchMs.max, 1)} ms), the loop stalled up to ${fmt(on.maxStallMs, 0)} ms, ` +
      `and ${fmt(on.rowsPerSecond / on.rps, 2)} rows were written per request; a backlog of ` +
      `${fmt(h.writer.backlogRows, 0)} rows stalls it ${fmt(h.writer.backlogStallMs, 0)} ms, as ` +
      `the writer drains batch after batch without yielding. `
    : "";
  return figures + "To close: run the writer's database in a Worker (db/history_writer.ts " +
    "posts plain rows; the local driver is synchronous), or at least yield between batches and " +
    "cap a batch by time; write a request's open row only if it is still running after a " +
    "second (crash recovery needs no more), so a short request costs two rows, not three or four.";
}

function throughputChecks(
  s: ThroughputResult,
  opts: { hot: HotPathProfile | null; history: HistoryResult | null },
): TargetCheck[] {
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
      closeWith: ratio >= 3 ? "" : "See the floor target: the same CPU per request closes both.",
    });
  }
  const vsFloor = "throughput at the bound at least 0.8× the floor's";
  if (!gw || !floor) {
    checks.push(unmeasured("throughput_floor", vsFloor, "floor or pulsegate did not run"));
  } else {
    const ratio = gw.bestRps / floor.bestRps;
    const gwCpu = cpuAtBest(gw);
    const floorCpu = cpuAtBest(floor);
    checks.push({
      id: "throughput_floor",
      target: vsFloor,
      measured: `${fmt(gw.bestRps, 0)} vs ${fmt(floor.bestRps, 0)} req/s: ${fmt(ratio)}×`,
      met: ratio >= 0.8,
      gap: ratio >= 0.8
        ? ""
        : `missed by ${fmt(0.8 - ratio)}× (needs ${fmt(0.8 * floor.bestRps, 0)} req/s)`,
      closeWith: ratio >= 0.8 ? "" : `Pulsegate spends ${fmt(gwCpu, 0)} µs of CPU per request ` +
        `where the floor spends ${fmt(floorCpu, 0)} µs (at each one's best level), and misses ` +
        `the p99 bound early because history batches stall its loop (scenario 5). 0.8× the ` +
        `floor needs about ${fmt(floorCpu / 0.8, 0)} µs per request and no stall near 30 ms. ` +
        cpuAdvice(hot),
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
      closeWith: cost < 0.1 ? "" : historyAdvice(opts.history),
    });
  }
  return checks;
}

function streamingChecks(s: StreamingResult): TargetCheck[] {
  const gw = s.rows.find((r) => r.target === "pulsegate");
  const direct = s.rows.find((r) => r.target === "direct");
  const target = "streaming: added per-chunk gap p99 under 0.2 ms";
  if (!gw || !direct || gw.complete === 0) {
    return [unmeasured("stream_gap", target, "pulsegate's streams did not complete")];
  }
  const added = gw.addedGapMs.p99 - direct.addedGapMs.p99;
  const met = added < 0.2;
  return [{
    id: "stream_gap",
    target,
    measured: `p99 added gap ${fmt(gw.addedGapMs.p99, 3)} ms through pulsegate vs ` +
      `${fmt(direct.addedGapMs.p99, 3)} ms direct: ${fmt(added, 3)} ms added`,
    met,
    gap: met ? "" : `missed by ${fmt(added - 0.2, 3)} ms`,
    closeWith: met ? "" : `Per delta pulsegate spends ${fmt(gw.cpuUsPerDelta ?? NaN, 0)} µs of ` +
      `CPU where the floor spends ${
        fmt(s.rows.find((r) => r.target === "floor")?.cpuUsPerDelta ?? NaN, 0)
      } µs. ` +
      "Each delta goes through three TransformStreams (gateway/sse_stream.ts SseDecoderStream, " +
      "gateway/sse_frames.ts sseFrameStream, the client pipe in gateway/client_channel.ts) and " +
      "restarts the idle timer with clearTimeout + setTimeout (gateway/idle_timer.ts `touch`), " +
      "and its JSON is parsed even when the bytes pass through unchanged " +
      "(gateway/openai_chat/stream.ts `readChatEvent`). To close: one reader loop that splits " +
      "SSE and writes to a ReadableStream controller, an idle timer that notes the time and " +
      "re-arms only when it fires, and a string-level pulse check for passthrough deltas " +
      '(parse only when `"usage"` or `"error"` appears).',
  }];
}

function heldAdvice(s: HeldResult, r: HeldResult["rows"][number]): string {
  const floor = s.rows.find((x) => x.target === "floor");
  const kib = (b: number | null | undefined) => `${fmt((b ?? NaN) / 1024, 1)} KiB`;
  return (floor
    ? `The floor itself holds a stream for ${kib(floor.bytesPerStream)} here (Deno's fetch + ` +
      `serve, a socket pair), so 40 KiB is below what this runtime's fetch costs at all. `
    : "") +
    `Of pulsegate's ${kib(r.bytesPerStream)}: ${kib(r.externalBytesPerStream)} is external ` +
    `memory, the 64 KiB buffer Deno's fetch body allocates for each pending read (read the ` +
    `upstream body with a BYOB reader and a small buffer in gateway/stream_forward.ts ` +
    `\`streamHop\`); ${kib(r.heapBytesPerStream)} is JS heap: per stream a LiveRequest with ` +
    `its row copies, a Hop with two AbortControllers and listeners, an idle timer, a ` +
    `keep-alive timer, three TransformStreams and their pending promises. The rest is native ` +
    `(connections, timers) and heap slack.`;
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

export function checkTargets(s: Scenarios, hot: HotPathProfile | null): TargetCheck[] {
  return [
    ...latencyChecks(s.addedLatency),
    ...throughputChecks(s.throughput, { hot, history: s.historyWrites }),
    ...streamingChecks(s.streaming),
    ...heldChecks(s.heldStreams),
  ];
}
