import assert from "node:assert/strict";
import type { RequestDetail } from "../api_types.ts";
import { axisTicks, describeBar, layoutTimeline } from "./timeline.ts";
import { attemptRecord, requestRecord } from "../../tests/db_helpers.ts";

const T0 = 1_000_000;

function detail(attempts: Parameters<typeof attemptRecord>[0][], durationMs: number | null) {
  return {
    request: requestRecord({ startedAt: T0, durationMs, state: "closed" }),
    attempts: attempts.map((a) => attemptRecord(a)),
  } satisfies RequestDetail;
}

Deno.test("timeline: a failover is two bars in a row on the request's time axis", () => {
  const t = layoutTimeline(
    detail([
      {
        hop: 1,
        upstream: "up1",
        startedAt: T0 + 5,
        headersMs: 10,
        durationMs: 300,
        outcome: "idle_timeout",
      },
      {
        hop: 2,
        upstream: "up2",
        startedAt: T0 + 305,
        headersMs: 20,
        firstContentMs: 40,
        durationMs: 95,
        outcome: "success",
      },
    ], 400),
    { now: T0 + 10_000 },
  );
  assert.equal(t.spanMs, 400);
  assert.deepEqual(
    t.bars.map((b) => [b.hop, b.startMs, b.endMs, b.headersMs, b.firstContentMs, b.hedged]),
    [[1, 5, 305, 15, null, false], [2, 305, 400, 325, 345, false]],
  );
  assert.deepEqual(t.ticks, [0, 100, 200, 300, 400]);
  assert.equal(
    describeBar(t.bars[0]!),
    "hop 1 up1: sent at 5 ms, headers at 15 ms, idle_timeout at 305 ms",
  );
});

Deno.test("timeline: hedges overlap and are marked; a resumed hop joins the one it continues", () => {
  const hedged = layoutTimeline(
    detail([
      { hop: 1, upstream: "slow", startedAt: T0, durationMs: 250, outcome: "hedge_lost" },
      {
        hop: 2,
        upstream: "fast",
        startedAt: T0 + 100,
        firstContentMs: 30,
        durationMs: 200,
        outcome: "success",
      },
    ], 300),
    { now: T0 },
  );
  assert.deepEqual(hedged.bars.map((b) => [b.hedged, b.resumes]), [[true, null], [true, null]]);
  const resumed = layoutTimeline(
    detail([
      {
        hop: 1,
        upstream: "a",
        startedAt: T0,
        firstContentMs: 10,
        durationMs: 100,
        outcome: "idle_timeout",
      },
      {
        hop: 2,
        upstream: "b",
        startedAt: T0 + 100,
        firstContentMs: 20,
        durationMs: 50,
        outcome: "resumed",
      },
    ], 150),
    { now: T0 },
  );
  assert.deepEqual(resumed.bars.map((b) => [b.hedged, b.resumes]), [[false, null], [false, 1]]);
  assert.match(describeBar(resumed.bars[1]!), /continues the answer of hop 1$/);
});

Deno.test("timeline: a hop still running lasts until now", () => {
  const t = layoutTimeline(
    detail([{ hop: 1, startedAt: T0 + 50, durationMs: null, outcome: null }], null),
    { now: T0 + 1_250 },
  );
  assert.deepEqual([t.bars[0]!.running, t.bars[0]!.endMs, t.spanMs], [true, 1_250, 1_250]);
  assert.match(describeBar(t.bars[0]!), /still running at 1250 ms$/);
});

Deno.test("timeline: axis ticks are round steps, at most six labels", () => {
  assert.deepEqual(axisTicks(1), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(axisTicks(3_700), [0, 1000, 2000, 3000]);
  assert.deepEqual(axisTicks(45), [0, 10, 20, 30, 40]);
});
