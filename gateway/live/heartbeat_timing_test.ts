/**
 * How long an instance may stay silent (gateway/live/heartbeat_timing.ts): three beats of 10 s,
 * as a span of the clock's `now()` values, so a clock that runs at another pace keeps it in
 * clock time.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import type { Clock } from "../runtime/clock.ts";
import { HEARTBEAT_MS, staleAfterMs } from "./heartbeat_timing.ts";

Deno.test("heartbeat: a beat every 10 s, and an instance silent for 30 s is stale", () => {
  assert.equal(HEARTBEAT_MS, 10_000);
  assert.equal(staleAfterMs(new VirtualClock()), 30_000);
});

Deno.test("heartbeat: the stale span is asked of the clock, not computed in ms by hand", () => {
  // A clock whose time runs twice as fast: 30 s of clock time span 15 000 of its now() values.
  const twice: Clock = {
    now: () => 1_000,
    after: () => () => {},
    sleep: () => Promise.resolve(),
    deadline: (ms, from = 1_000) => from + ms / 2,
    elapsed: (since, until = 1_000) => (until - since) * 2,
  };
  assert.equal(staleAfterMs(twice), 15_000);
});
