/**
 * The idle timer (gateway/forward/idle_timer.ts, docs/design.md "Pulse") at the default idle
 * timeout, 300 s (gateway/config/schema.ts `idle_timeout_secs`), on the virtual clock: it fires
 * at the exact millisecond, content restarts it, a pause holds what was left, and a steady
 * stream is never cut however long it runs.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { FailoverSchema } from "../config/schema.ts";
import { IdleTimer } from "./idle_timer.ts";

const IDLE_MS = FailoverSchema.parse({}).idle_timeout_secs * 1000;

/** A timer at the default idle timeout, and the instants (ms since the start) it fired at. */
function idleTimer() {
  const clock = new VirtualClock();
  const fired: number[] = [];
  const owner = { idled: () => fired.push(clock.sinceStart), noFirstContent: () => {} };
  const timer = new IdleTimer(clock, { ms: IDLE_MS, owner });
  return { clock, fired, timer };
}

Deno.test("idle timer: the default is 300 s, and silence fires it at 300 000 ms, not 1 ms before", () => {
  assert.equal(IDLE_MS, 300_000);
  const { clock, fired, timer } = idleTimer();
  clock.advance(299_999);
  assert.deepEqual(fired, []);
  clock.advance(1);
  assert.deepEqual(fired, [300_000]);
  clock.advance(3_600_000);
  assert.deepEqual(fired, [300_000], "once");
  assert.equal(timer.touched, false);
});

Deno.test("idle timer: content restarts the whole 300 s, and only the last content counts", () => {
  const { clock, fired, timer } = idleTimer();
  clock.advance(100_000);
  timer.touch();
  clock.advance(250_000);
  timer.touch();
  assert.equal(timer.touched, true);
  clock.advance(299_999);
  assert.deepEqual(fired, [], "350 s since the start, but 299 999 ms since the last content");
  clock.advance(1);
  assert.deepEqual(fired, [650_000]);
});

Deno.test("idle timer: a stream with content every 299 s for 20 minutes is never cut, and is 300 s after it stops", () => {
  const { clock, fired, timer } = idleTimer();
  for (let at = 299_000; at <= 1_200_000; at += 299_000) {
    clock.advance(299_000);
    timer.touch();
  }
  assert.equal(clock.sinceStart, 1_196_000);
  assert.deepEqual(fired, []);
  clock.advance(300_000);
  assert.deepEqual(fired, [1_496_000]);
});

Deno.test("idle timer: a pause holds what was left, however long it lasts; resume runs the rest", () => {
  const { clock, fired, timer } = idleTimer();
  clock.advance(100_000);
  timer.pause();
  // A slow client drains for an hour: the upstream's silence is not counted meanwhile.
  clock.advance(3_600_000);
  assert.deepEqual(fired, []);
  timer.resume();
  clock.advance(199_999);
  assert.deepEqual(fired, []);
  clock.advance(1);
  assert.deepEqual(fired, [3_900_000], "100 s before the pause plus 200 s after it");
});

Deno.test("idle timer: pause and resume repeated hold the sum; a resume without a pause and a second pause change nothing", () => {
  const { clock, fired, timer } = idleTimer();
  timer.resume();
  for (let i = 0; i < 5; i++) {
    clock.advance(50_000);
    timer.pause();
    timer.pause();
    clock.advance(1_000_000);
    timer.resume();
  }
  // 250 s counted in five pieces; 50 s are left.
  clock.advance(49_999);
  assert.deepEqual(fired, []);
  clock.advance(1);
  assert.deepEqual(fired, [5 * 1_050_000 + 50_000]);
});

Deno.test("idle timer: content while paused restarts it running, the full 300 s", () => {
  const { clock, fired, timer } = idleTimer();
  clock.advance(200_000);
  timer.pause();
  clock.advance(500_000);
  timer.touch();
  clock.advance(299_999);
  assert.deepEqual(fired, []);
  clock.advance(1);
  assert.deepEqual(fired, [1_000_000]);
});

Deno.test("idle timer: stopped, it never fires; a stop while paused too", () => {
  const a = idleTimer();
  a.clock.advance(299_999);
  a.timer.stop();
  a.clock.advance(3_600_000);
  assert.deepEqual(a.fired, []);
  const b = idleTimer();
  b.timer.pause();
  b.timer.stop();
  b.timer.resume();
  b.clock.advance(3_600_000);
  assert.deepEqual(b.fired, []);
});

/** A timer that also keeps a first-content timeout; each callback's instants. */
function withFirstContent(firstContentMs: number, ms = IDLE_MS) {
  const clock = new VirtualClock();
  const idled: number[] = [];
  const first: number[] = [];
  const owner = {
    idled: () => idled.push(clock.sinceStart),
    noFirstContent: () => first.push(clock.sinceStart),
  };
  const timer = new IdleTimer(clock, { ms, owner, firstContentMs });
  return { clock, idled, first, timer };
}

Deno.test("idle timer: the first-content timeout fires at its exact ms, not 1 ms before, and the idle timeout still after it", () => {
  const { clock, idled, first } = withFirstContent(15_000);
  clock.advance(14_999);
  assert.deepEqual(first, []);
  clock.advance(1);
  assert.deepEqual(first, [15_000]);
  clock.advance(284_999);
  assert.deepEqual(idled, []);
  clock.advance(1);
  assert.deepEqual(idled, [300_000]);
  clock.advance(3_600_000);
  assert.deepEqual(first, [15_000], "once");
});

Deno.test("idle timer: content before the first-content timeout cancels it, and restarts the idle timeout", () => {
  const { clock, idled, first, timer } = withFirstContent(15_000);
  clock.advance(14_999);
  timer.touch();
  clock.advance(3_600_000);
  assert.deepEqual(first, []);
  assert.deepEqual(idled, [314_999]);
});

Deno.test("idle timer: the first-content timeout runs on through a pause and an idle stop; close ends it", () => {
  const a = withFirstContent(15_000);
  a.clock.advance(5_000);
  a.timer.pause();
  a.clock.advance(10_000);
  assert.deepEqual(a.first, [15_000]);
  const b = withFirstContent(15_000);
  b.timer.stop();
  b.clock.advance(15_000);
  assert.deepEqual(b.first, [15_000]);
  assert.deepEqual(b.idled, []);
  const c = withFirstContent(15_000);
  c.clock.advance(14_999);
  c.timer.close();
  c.clock.advance(3_600_000);
  assert.deepEqual([c.first, c.idled], [[], []]);
});

Deno.test("idle timer: an idle timeout no longer than the first-content timeout fires first and alone", () => {
  const tie = withFirstContent(60_000, 60_000);
  tie.clock.advance(3_600_000);
  assert.deepEqual([tie.idled, tie.first], [[60_000], []]);
  const shorter = withFirstContent(60_000, 30_000);
  shorter.clock.advance(3_600_000);
  assert.deepEqual([shorter.idled, shorter.first], [[30_000], []]);
});
