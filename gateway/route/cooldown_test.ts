/**
 * Cooldown (gateway/route/cooldown.ts, docs/design.md "Cooldown") at the defaults of
 * gateway/config/schema.ts (`failures_to_pause` 3, `pause_secs` 60, `max_pause_secs` 600) on the
 * virtual clock: the pause ends at the exact millisecond, doubles to its cap, is half-open after
 * it with one probe at a time, and a Retry-After pauses for its own length, capped.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { FailoverSchema } from "../config/schema.ts";
import { Cooldowns, type CooldownState, type ProbeTicket } from "./cooldown.ts";

const DEFAULTS = FailoverSchema.parse({});
const POLICY = {
  failuresToPause: DEFAULTS.failures_to_pause,
  pauseSecs: DEFAULTS.pause_secs,
  maxPauseSecs: DEFAULTS.max_pause_secs,
};
/**
 * A probe's lease as failover.ts claims it: the candidate's silence bound (the 300 s idle
 * timeout by default) plus `slot_wait_secs` (30).
 */
const LEASE_MS = (DEFAULTS.idle_timeout_secs + DEFAULTS.slot_wait_secs) * 1000;

function cooldowns() {
  const clock = new VirtualClock();
  const saved: CooldownState[] = [];
  const c = new Cooldowns(clock, { policy: () => POLICY, save: (s) => saved.push(s) });
  /** The pause's length from now, in ms; null when not paused. */
  const pauseLeft = (key: string) => {
    const until = c.get(key).pausedUntil;
    return until === null ? null : clock.elapsed(clock.now(), until);
  };
  return { clock, c, saved, pauseLeft };
}

Deno.test("cooldown: the defaults are 3 failures, 60 s, capped at 600 s", () => {
  assert.deepEqual(POLICY, { failuresToPause: 3, pauseSecs: 60, maxPauseSecs: 600 });
  assert.equal(LEASE_MS, 330_000);
});

Deno.test("cooldown: two failures in a row do not pause; the third pauses for exactly 60 s", () => {
  const { clock, c, pauseLeft } = cooldowns();
  c.failure("u", "gw.upstream.error");
  c.failure("u", "gw.upstream.error");
  assert.equal(c.isPaused("u"), false);
  assert.equal(c.phase("u"), "ok");
  c.failure("u", "gw.upstream.error");
  assert.equal(pauseLeft("u"), 60_000);
  assert.equal(c.get("u").reason, "3 failures in a row; last: gw.upstream.error");
  clock.advance(59_999);
  assert.equal(c.isPaused("u"), true, "1 ms before the end");
  assert.equal(c.phase("u"), "paused");
  assert.equal(c.halfOpen("u"), false);
  clock.advance(1);
  assert.equal(c.isPaused("u"), false);
  assert.equal(c.phase("u"), "probing");
  assert.equal(c.halfOpen("u"), true, "half-open at 60 000 ms");
});

Deno.test("cooldown: each failed probe doubles the pause, 60, 120, 240, 480, then 600 s for ever", async () => {
  const { clock, c, pauseLeft } = cooldowns();
  for (let i = 0; i < 3; i++) c.failure("u");
  const pauses: number[] = [];
  const startedAt: number[] = [];
  for (let round = 0; round < 6; round++) {
    const left = pauseLeft("u")!;
    pauses.push(left / 1000);
    clock.advance(left - 1);
    assert.equal(await c.claimProbe("u", { leaseMs: LEASE_MS }), "taken", "still paused");
    clock.advance(1);
    startedAt.push(clock.sinceStart);
    const probe = await c.claimProbe("u", { leaseMs: LEASE_MS });
    assert.equal(typeof probe, "object", "the pause's end: one probe");
    // Half-open: one failure is enough.
    c.failure("u", "gw.upstream.status_503");
  }
  assert.deepEqual(pauses, [60, 120, 240, 480, 600, 600]);
  assert.deepEqual(startedAt, [60_000, 180_000, 420_000, 900_000, 1_500_000, 2_100_000]);
  assert.equal(pauseLeft("u"), 600_000);
  assert.equal(c.get("u").reason, "the probe after a pause failed: gw.upstream.status_503");
});

Deno.test("cooldown: half-open sends one probe at a time; the others are told taken until it settles", async () => {
  const { clock, c } = cooldowns();
  for (let i = 0; i < 3; i++) c.failure("u");
  clock.advance(60_000);
  const probe = await c.claimProbe("u", { leaseMs: LEASE_MS }) as ProbeTicket;
  assert.equal(probe.upstream, "u");
  assert.equal(clock.elapsed(clock.now(), probe.until), LEASE_MS);
  assert.equal(await c.claimProbe("u", { leaseMs: LEASE_MS }), "taken");
  assert.equal(c.isPaused("u"), true, "not sent new requests while its probe is out");
  c.success("u");
  assert.equal(await c.claimProbe("u", { leaseMs: LEASE_MS }), "open");
  assert.equal(c.phase("u"), "ok");
  // Closed again: the count starts over, and the next pause is the first one's 60 s.
  c.failure("u");
  c.failure("u");
  assert.equal(c.isPaused("u"), false);
  c.failure("u");
  assert.equal(clock.elapsed(clock.now(), c.get("u").pausedUntil!), 60_000);
});

Deno.test("cooldown: a probe that ends with no word is given back at once; one whose process died, at its lease's end", async () => {
  const { clock, c } = cooldowns();
  for (let i = 0; i < 3; i++) c.failure("u");
  clock.advance(60_000);
  const first = await c.claimProbe("u", { leaseMs: LEASE_MS }) as ProbeTicket;
  c.probeEnded(first);
  const second = await c.claimProbe("u", { leaseMs: LEASE_MS });
  assert.equal(typeof second, "object", "the next request probes");
  // That one never comes back: 330 s later the probe is free again.
  clock.advance(LEASE_MS - 1);
  assert.equal(await c.claimProbe("u", { leaseMs: LEASE_MS }), "taken");
  clock.advance(1);
  assert.equal(typeof await c.claimProbe("u", { leaseMs: LEASE_MS }), "object");
  // A stale ticket's end does not free the newer probe.
  c.probeEnded(first);
  assert.equal(await c.claimProbe("u", { leaseMs: LEASE_MS }), "taken");
});

Deno.test("cooldown: a Retry-After pauses for exactly its seconds, capped at 600, never shortening a longer pause", () => {
  const { clock, c, pauseLeft } = cooldowns();
  c.pauseFor("u", 30);
  assert.equal(pauseLeft("u"), 30_000);
  assert.equal(c.get("u").reason, "rate limited: Retry-After 30 s");
  clock.advance(29_999);
  assert.equal(c.isPaused("u"), true);
  clock.advance(1);
  assert.equal(c.isPaused("u"), false);
  c.pauseFor("v", 86_400);
  assert.equal(pauseLeft("v"), 600_000, "a day's Retry-After waits the cap");
  c.pauseFor("v", 5);
  assert.equal(pauseLeft("v"), 600_000, "a shorter one leaves the longer pause");
  clock.advance(100_000);
  c.pauseFor("v", 600);
  assert.equal(pauseLeft("v"), 600_000, "a longer one moves it on");
});

Deno.test("cooldown: levels are apart; an operator's resume clears an upstream and its members", () => {
  const { c, saved } = cooldowns();
  for (let i = 0; i < 3; i++) c.failure("u/m");
  assert.equal(c.isPaused("u/m"), true);
  assert.equal(c.isPaused("u"), false, "a member's pause is not its upstream's");
  assert.equal(c.get("u/m").model, "m");
  for (let i = 0; i < 3; i++) c.failure("u");
  c.resume("u");
  assert.equal(c.isPaused("u"), false);
  assert.equal(c.isPaused("u/m"), false);
  assert.equal(c.get("u/m").consecutiveFailures, 0);
  assert.ok(saved.length >= 8, "every change handed to save");
});
