/**
 * The targets of scenario 9 (the latency one caller feels): added p50 and p99 over the floor,
 * one request at a time, for whole and for streamed answers, and whole answers' throughput at
 * 64 connections as a share of the floor's. Ratios and differences are taken within the one run,
 * where the floor and pulsegate alternated.
 */
import type { OneCallerResult, TargetCheck } from "../results.ts";
import { spreadOf } from "../scenarios/cpu_cost.ts";
import type { AnswerKind } from "../scenarios/one_caller.ts";
import { type Context, fmt, unmeasured } from "./check_parts.ts";

/** Added over the floor at one connection, ms. */
export const ONE_CALLER_P50_MS = 0.15;
export const ONE_CALLER_P99_MS = 1;
/** Whole answers at 64 connections: requests/s at least this share of the floor's. */
export const THROUGHPUT_64_SHARE = 0.5;

function addedCheck(s: OneCallerResult | undefined, kind: AnswerKind): TargetCheck {
  const id = `one_caller_${kind}`;
  const target = `one caller, ${kind} answers: added p50 at most ${ONE_CALLER_P50_MS} ms and ` +
    `p99 at most ${ONE_CALLER_P99_MS} ms over the floor`;
  if (!s) return unmeasured(id, target, "this run had no one-caller scenario");
  const gw = s.rows.find((r) => r.target === "pulsegate" && r.kind === kind);
  const floor = s.rows.find((r) => r.target === "floor" && r.kind === kind);
  if (!gw?.addedMs || !floor || gw.latencyMs.count === 0) {
    return unmeasured(id, target, "floor or pulsegate did not run");
  }
  const a = gw.addedMs;
  const met = a.p50 <= ONE_CALLER_P50_MS && a.p99 <= ONE_CALLER_P99_MS && gw.errors === 0;
  const misses = [
    a.p50 > ONE_CALLER_P50_MS ? `p50 by ${fmt(a.p50 - ONE_CALLER_P50_MS, 3)} ms` : "",
    a.p99 > ONE_CALLER_P99_MS ? `p99 by ${fmt(a.p99 - ONE_CALLER_P99_MS, 3)} ms` : "",
    gw.errors ? `${gw.errors} errors` : "",
  ].filter(Boolean);
  const portkey = s.rows.find((r) => r.target === "portkey" && r.kind === kind)?.addedMs;
  return {
    id,
    target,
    measured: `pulsegate − floor: p50 ${fmt(a.p50, 3)}, p90 ${fmt(a.p90, 3)}, p99 ` +
      `${fmt(a.p99, 3)}, max ${fmt(a.max, 3)} ms over ${gw.latencyMs.count} requests (the ` +
      `floor's p50 / p99 ${fmt(floor.latencyMs.p50, 3)} / ${fmt(floor.latencyMs.p99, 3)} ms)` +
      (portkey ? `; Portkey adds p50 ${fmt(portkey.p50, 3)}, p99 ${fmt(portkey.p99, 3)} ms` : ""),
    met,
    gap: met ? "" : `missed: ${misses.join(", ")}`,
    closeWith: "",
  };
}

function throughput64Check(s: OneCallerResult | undefined): TargetCheck {
  const id = "throughput_64";
  const connections = s?.throughput64.connections ?? 64;
  const target = `whole answers at ${connections} connections: throughput at least ` +
    `${THROUGHPUT_64_SHARE}× the floor's`;
  if (!s) return unmeasured(id, target, "this run had no one-caller scenario");
  const gw = s.throughput64.rows.find((r) => r.target === "pulsegate");
  const floor = s.throughput64.rows.find((r) => r.target === "floor");
  if (!gw?.rps.length || !floor?.rps.length) {
    return unmeasured(id, target, "floor or pulsegate did not run");
  }
  const g = spreadOf(gw.rps);
  const f = spreadOf(floor.rps);
  const ratio = g.median / f.median;
  const met = ratio >= THROUGHPUT_64_SHARE && gw.errors === 0;
  const cpuG = spreadOf(gw.cpuUsPerRequest).median;
  const cpuF = spreadOf(floor.cpuUsPerRequest).median;
  return {
    id,
    target,
    measured: `${fmt(g.median, 0)} (${fmt(g.min, 0)}–${fmt(g.max, 0)}) vs ${fmt(f.median, 0)} ` +
      `req/s: ${fmt(ratio)}× over ${s.throughput64.reps} alternating repetitions; CPU ` +
      `${fmt(cpuG, 0)} vs ${fmt(cpuF, 0)} µs per request (${fmt(cpuG / cpuF)}×)`,
    met,
    gap: met ? "" : `missed by ${fmt(THROUGHPUT_64_SHARE - ratio)}× (needs ` +
      `${fmt(THROUGHPUT_64_SHARE * f.median, 0)} req/s)`,
    closeWith: met ? "" : `The proxy is pinned to one core and saturates it here, so the ratio ` +
      `is the floor's CPU per request over pulsegate's (${fmt(cpuF / cpuG)}); ` +
      `${THROUGHPUT_64_SHARE}× needs at most ${fmt(cpuF / THROUGHPUT_64_SHARE, 0)} µs per request.`,
  };
}

export function oneCallerChecks(ctx: Context): TargetCheck[] {
  const s = ctx.scenarios.oneCaller;
  return [addedCheck(s, "whole"), addedCheck(s, "streamed"), throughput64Check(s)];
}
