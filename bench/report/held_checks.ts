/**
 * The held-stream targets (scenario 4): how late the content after 5,000 held streams arrives
 * against the floor held at the same count, and the JS heap a held stream keeps alive.
 */
import type { HeldResult, HeldRow, HotPathProfile, TargetCheck } from "../results.ts";
import { fmt, shareOf, unmeasured } from "./check_parts.ts";

/** JS heap a held stream keeps alive (after a full GC), at most. */
const LIMIT_KIB = 16;
const FULL_COUNT = 5_000;
const ALLOWANCE_MS = 50;
const MiB = 1024 * 1024;

const kib = (b: number | null | undefined) => `${fmt((b ?? NaN) / 1024, 1)} KiB`;

function largest(s: HeldResult, target: string): HeldRow | undefined {
  return s.rows.filter((x) => x.target === target).sort((a, b) => b.count - a.count)[0];
}

function heapAdvice(r: HeldRow, live: number): string {
  const raw = r.heapBytesPerStream;
  return `At ${r.count} held streams that is ${fmt((live * r.count) / MiB, 0)} MiB of live ` +
    "state for each full GC to mark. " +
    (raw !== null && raw > live
      ? `Read without a GC during the timed hold the heap grew by ${kib(raw)} per stream: the ` +
        `other ${kib(raw - live)} is garbage not yet collected. `
      : "") +
    "What a held stream keeps, by V8 node type and constructor (objects, closures and promises " +
    "per stream), from heap snapshots before and while streams are held: " +
    "`deno run -A bench/held_heap.ts --count 500` (`--base DIR` measures another checkout " +
    "alongside).";
}

function heapCheck(s: HeldResult): TargetCheck {
  const target = `JS heap per held stream at most ${LIMIT_KIB} KiB (what stays after a full GC)`;
  const r = largest(s, "pulsegate");
  if (!r) return unmeasured("held_heap", target, "no held-stream run through pulsegate");
  const live = r.liveHeapBytesPerStream ?? null;
  if (live === null) {
    return unmeasured("held_heap", target, `no heap was read after a GC at ${r.count} streams`);
  }
  const floor = s.rows.find((x) => x.target === "floor" && x.count === r.count) ??
    largest(s, "floor");
  const limit = LIMIT_KIB * 1024;
  const met = live <= limit;
  return {
    id: "held_heap",
    target,
    measured: `${kib(live)} per stream at ${r.count} streams; without a GC: JS heap ` +
      `${kib(r.heapBytesPerStream)}, external ${kib(r.externalBytesPerStream)}, resident ` +
      `${kib(r.bytesPerStream)} per stream` +
      (floor ? ` (the floor: resident ${kib(floor.bytesPerStream)} at ${floor.count})` : ""),
    met,
    gap: met ? "" : `missed by ${kib(live - limit)} per stream (${fmt(live / limit)}× the limit)`,
    closeWith: met ? "" : heapAdvice(r, live),
  };
}

function lateAdvice(
  s: HeldResult,
  rows: { gw: HeldRow; floor: HeldRow },
  hot: HotPathProfile | null,
): string {
  const { gw, floor } = rows;
  const frames = gw.count * s.deltas;
  const perFrame = (r: HeldRow) => (r.proxyCpuSeconds * 1e6) / (r.count * s.deltas);
  const byCount = s.rows.filter((x) => x.target === "pulsegate")
    .sort((a, b) => a.count - b.count)
    .map((x) => `${x.count}: ${fmt(x.delayMs.max, 0)} ms`).join(", ");
  const rate = (gw.count * 1000) / s.deltaGapMs;
  return `The median frame is late too (${fmt(gw.delayMs.p50, 1)} ms vs the floor's ` +
    `${
      fmt(floor.delayMs.p50, 1)
    } ms), so most frames wait in a queue, not a few stragglers: content comes at about ${
      fmt(rate, 0)
    } frames/s, and over the run ` +
    `(ramp, hold, content) pulsegate used ${fmt(gw.proxyCpuSeconds, 1)} s of CPU to the floor's ` +
    `${fmt(floor.proxyCpuSeconds, 1)} s, ${fmt(perFrame(gw), 0)} µs per frame relayed against ` +
    `${fmt(perFrame(floor), 0)} µs (${frames} frames; holding and keep-alives included). ` +
    `The latest frame by stream count: ${byCount}. ${heapAtCount(gw)}` + jsRelayLate(s, gw) +
    heldProfileText(hot);
}

/** How much heap the held streams keep, live where it was read after a GC. */
function heapAtCount(gw: HeldRow): string {
  const live = gw.liveHeapBytesPerStream ?? null;
  if (live !== null) {
    return `At this count the held streams keep ${fmt((live * gw.count) / MiB, 0)} MiB of live ` +
      "JS heap for each full GC to mark. ";
  }
  if (gw.heapBytesPerStream === null) return "";
  return `At this count pulsegate's heap grew by ${
    fmt((gw.heapBytesPerStream * gw.count) / MiB, 0)
  } MiB while they were held (garbage included). `;
}

/** What the profile of the content phase (bench/held_profile.ts) says, where it was taken. */
function heldProfileText(hot: HotPathProfile | null): string {
  if (!hot) {
    return "The content phase was not profiled in this run; the CPU per delta of scenario 6 " +
      "(below) is the same relay work without the held state.";
  }
  const f = hot.byFile;
  const ours = shareOf(f, /^(gateway|db)\//);
  return `In the profile of the content phase (below, ${hot.seconds} s after the release) ` +
    `GC takes ${fmt(shareOf(f, /garbage/), 1)} %, Web Streams ` +
    `${fmt(shareOf(f, /06_streams/), 1)} %, pulsegate's own files ${fmt(ours, 1)} % ` +
    `(the 15 busiest files), the rest is the runtime's I/O and promises.`;
}

/** How late the JS relay's content came at the same count, where it was held too. */
function jsRelayLate(s: HeldResult, gw: HeldRow): string {
  const js = s.rows.find((x) => x.target === "floor_js" && x.count === gw.count);
  if (!js) return "";
  return `The JS relay held at ${js.count}: median ${fmt(js.delayMs.p50, 1)} ms, p99 ` +
    `${fmt(js.delayMs.p99, 1)} ms, latest ${fmt(js.delayMs.max, 0)} ms, ` +
    `${fmt(js.proxyCpuSeconds, 1)} s of CPU. `;
}

function lateCheck(s: HeldResult, hot: HotPathProfile | null): TargetCheck {
  const target = `${FULL_COUNT.toLocaleString("en")} held streams then content: no frame ` +
    `later than ${ALLOWANCE_MS} ms more than the floor's`;
  const gw = largest(s, "pulsegate");
  if (!gw) return unmeasured("held_late", target, "no held-stream run through pulsegate");
  const floor = s.rows.find((x) => x.target === "floor" && x.count === gw.count);
  if (!floor) {
    return unmeasured("held_late", target, `the floor was not held at ${gw.count} streams`);
  }
  const added = gw.delayMs.max - floor.delayMs.max;
  const lost = gw.lostDeltas + (gw.count - gw.completeStreams);
  const full = gw.count >= FULL_COUNT;
  const onTime = added <= ALLOWANCE_MS;
  const met = full && lost === 0 && onTime;
  const misses = [
    full ? "" : `ran ${gw.count} streams, not ${FULL_COUNT}`,
    lost === 0
      ? ""
      : `${gw.lostDeltas} frames lost, ${gw.count - gw.completeStreams} streams incomplete`,
    onTime ? "" : `the latest frame ${fmt(added - ALLOWANCE_MS, 0)} ms past the allowance ` +
      `(needs ${fmt(floor.delayMs.max + ALLOWANCE_MS, 0)} ms at most)`,
  ].filter(Boolean);
  return {
    id: "held_late",
    target,
    measured: `${gw.count} streams: latest frame ${fmt(gw.delayMs.max, 1)} ms vs the floor's ` +
      `${fmt(floor.delayMs.max, 1)} ms (${fmt(added, 1)} ms more); p99 ` +
      `${fmt(gw.delayMs.p99, 1)} vs ${fmt(floor.delayMs.p99, 1)} ms; frames over ` +
      `${s.lateMs} ms ${gw.lateDeltas} vs ${floor.lateDeltas}; ${gw.lostDeltas} lost`,
    met,
    gap: met ? "" : `missed: ${misses.join("; ")}`,
    closeWith: met || onTime ? "" : lateAdvice(s, { gw, floor }, hot),
  };
}

export function heldChecks(s: HeldResult, hot: HotPathProfile | null = null): TargetCheck[] {
  return [lateCheck(s, hot), heapCheck(s)];
}
