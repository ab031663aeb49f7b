/**
 * The one clock (gateway/runtime/clock.ts, docs/architecture.md "Time"): the system clock's
 * scale lives in `deadline` and `elapsed` alone, its timers and sleeps fire and cancel, and
 * `repeatEvery` runs at each period's exact end (on the virtual clock). The real-time cases use
 * milliseconds and bound nothing from above: a late timer is no failure here.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { REAL_TIME, repeatEvery, systemClock, workMs } from "./clock.ts";

Deno.test("system clock: a scale must be above 0", () => {
  for (const scale of [0, -1, NaN]) assert.throws(() => systemClock(scale), RangeError);
});

Deno.test("system clock: now() stays the real epoch whatever the scale; deadline and elapsed carry it", () => {
  const fast = systemClock(0.01);
  const before = Date.now();
  const now = fast.now();
  const deadline = fast.deadline(300_000);
  const after = Date.now();
  assert.ok(before <= now && now <= after, "real epoch ms");
  // 300 s of clock time at scale 0.01 are 3 real seconds ahead.
  assert.ok(deadline >= before + 3_000 && deadline <= after + 3_000, `${deadline - before}`);
  assert.equal(fast.elapsed(1_000, 4_000), 300_000);
  assert.equal(systemClock(2).elapsed(0, 1_000), 500);
  assert.equal(REAL_TIME.elapsed(5, 1_005), 1_000);
  // A point ahead read back is at least as far ahead (each real ms since `now` adds 100).
  assert.ok(fast.elapsed(now, fast.deadline(60_000)) >= 60_000);
  const real = REAL_TIME.deadline(1_000) - Date.now();
  assert.ok(real <= 1_000 && real >= 0, `${real}`);
});

Deno.test("system clock: elapsed defaults to now, and is never negative for a past instant", () => {
  const since = REAL_TIME.now();
  assert.ok(REAL_TIME.elapsed(since) >= 0);
});

Deno.test("system clock: a timer fires, a cancelled one does not; a scaled timer waits its real share", async () => {
  const fast = systemClock(0.001);
  const fired: string[] = [];
  const cancel = fast.after(1_000, () => fired.push("cancelled"));
  cancel();
  // 1 000 clock ms at scale 0.001 is 1 real ms: this test would wait a second without it.
  await new Promise<void>((resolve) => fast.after(1_000, () => resolve()));
  await REAL_TIME.sleep(5);
  assert.deepEqual(fired, []);
});

Deno.test("system clock: a sleep resolves, and rejects with the signal's reason when cut or already aborted", async () => {
  await REAL_TIME.sleep(1);
  const stop = new AbortController();
  const sleeping = REAL_TIME.sleep(3_600_000, stop.signal);
  const reason = new Error("stopped");
  stop.abort(reason);
  await assert.rejects(sleeping, (err) => err === reason);
  await assert.rejects(REAL_TIME.sleep(1, stop.signal), (err) => err === reason);
});

Deno.test("repeatEvery: runs at the end of each period, exactly, until cancelled", () => {
  const clock = new VirtualClock();
  const ran: number[] = [];
  const cancel = repeatEvery(60_000, { clock, run: () => ran.push(clock.sinceStart) });
  clock.advance(59_999);
  assert.deepEqual(ran, []);
  clock.advance(180_001);
  assert.deepEqual(ran, [60_000, 120_000, 180_000, 240_000]);
  cancel();
  clock.advance(3_600_000);
  assert.equal(ran.length, 4);
});

Deno.test("repeatEvery: a run that cancels stops the next; one that throws does not stop the period", () => {
  const clock = new VirtualClock();
  const ran: number[] = [];
  const cancel: () => void = repeatEvery(1_000, {
    clock,
    run: () => {
      ran.push(clock.sinceStart);
      if (ran.length === 3) cancel();
    },
  });
  clock.advance(10_000);
  assert.deepEqual(ran, [1_000, 2_000, 3_000]);
  const thrown: number[] = [];
  repeatEvery(1_000, {
    clock,
    run: () => {
      thrown.push(clock.sinceStart);
      throw new Error("a failing run");
    },
  });
  assert.throws(() => clock.advance(1_000), /a failing run/);
  assert.throws(() => clock.advance(1_000), /a failing run/);
  assert.deepEqual(thrown, [11_000, 12_000], "re-armed before the run");
});

Deno.test("workMs: a later reading is never smaller, whatever the wall clock does", async () => {
  const first = workMs();
  await REAL_TIME.sleep(1);
  assert.ok(workMs() >= first);
});
