/**
 * One runtime timer for a clock's timers (gateway/runtime/timer_queue.ts), on a host whose time
 * and runtime timers the test drives: each entry fires once, at its deadline, in deadline order
 * (equal ones in the order added), one per runtime callback; a cancelled one never; and no
 * runtime timer is left armed with nothing pending (the process could not exit).
 */
import assert from "node:assert/strict";
import { type TimerHost, TimerQueue } from "./timer_queue.ts";

/** A host with manual time: `advance` runs each armed runtime timer that is due, one at a time. */
function manualHost() {
  let now = 0;
  let next = 1;
  const armed = new Map<number, { at: number; fire: () => void }>();
  const log = { arms: 0 };
  const host: TimerHost<number> = {
    now: () => now,
    arm(ms, fire) {
      log.arms++;
      armed.set(next, { at: now + ms, fire });
      return next++;
    },
    disarm(handle) {
      armed.delete(handle);
    },
  };
  const due = () => [...armed].filter(([, t]) => t.at <= now).sort((a, b) => a[1].at - b[1].at)[0];
  return {
    host,
    log,
    armed: () => armed.size,
    advance(to: number) {
      for (;;) {
        const [id, timer] = due() ?? [];
        if (id === undefined || !timer) {
          // Jump to the next runtime timer within reach, as time passing would.
          const soonest = Math.min(...[...armed.values()].map((t) => t.at));
          if (soonest <= to && soonest > now) {
            now = soonest;
            continue;
          }
          now = to;
          return;
        }
        armed.delete(id);
        timer.fire();
      }
    },
  };
}

Deno.test("timer queue: entries fire at their deadlines in deadline order, ties in the order added", () => {
  const m = manualHost();
  const q = new TimerQueue(m.host);
  const fired: Array<[string, number]> = [];
  const at = (name: string) => () => fired.push([name, m.host.now()]);
  q.add(300, at("c"));
  q.add(100, at("a"));
  q.add(300, at("d"));
  q.add(200, at("b"));
  m.advance(99);
  assert.deepEqual(fired, []);
  m.advance(1_000);
  assert.deepEqual(fired, [["a", 100], ["b", 200], ["c", 300], ["d", 300]]);
  assert.equal(q.size, 0);
  assert.equal(m.armed(), 0, "nothing pending, no runtime timer");
});

Deno.test("timer queue: a cancelled entry never fires, wherever it sits in the heap; cancelling twice is harmless", () => {
  const m = manualHost();
  const q = new TimerQueue(m.host);
  const fired: number[] = [];
  const entries = [50, 10, 40, 20, 30, 60, 5].map((ms) => q.add(ms, () => fired.push(ms)));
  // The first, a middle one and the earliest.
  q.remove(entries[0]!);
  q.remove(entries[2]!);
  q.remove(entries[6]!);
  q.remove(entries[6]!);
  m.advance(1_000);
  assert.deepEqual(fired, [10, 20, 30, 60]);
  q.remove(entries[1]!);
  assert.deepEqual(fired, [10, 20, 30, 60]);
});

Deno.test("timer queue: later timers of the same span leave the runtime timer alone; an earlier one re-arms it", () => {
  const m = manualHost();
  const q = new TimerQueue(m.host);
  for (let i = 0; i < 100; i++) q.add(300_000, () => {});
  assert.equal(m.log.arms, 1, "one runtime timer for a hundred idle timeouts");
  q.add(1_000, () => {});
  assert.equal(m.log.arms, 2);
  assert.equal(m.armed(), 1, "the later runtime timer was cleared");
});

Deno.test("timer queue: the last cancel clears the runtime timer", () => {
  const m = manualHost();
  const q = new TimerQueue(m.host);
  const a = q.add(300_000, () => {});
  const b = q.add(15_000, () => {});
  q.remove(b);
  assert.equal(m.armed(), 1, "an early runtime timer may stay while an entry is pending");
  q.remove(a);
  assert.equal(m.armed(), 0);
});

Deno.test("timer queue: one entry per runtime callback; one added by a callback for now fires after the others due", () => {
  const m = manualHost();
  const fired: string[] = [];
  let callbacks = 0;
  const host = m.host;
  const counting: TimerHost<number> = {
    ...host,
    arm: (ms, fire) =>
      host.arm(ms, () => {
        callbacks++;
        fire();
      }),
  };
  const q2 = new TimerQueue(counting);
  q2.add(10, () => {
    fired.push("a");
    q2.add(0, () => fired.push("c"));
  });
  q2.add(10, () => fired.push("b"));
  m.advance(10);
  assert.deepEqual(fired, ["a", "b", "c"]);
  assert.equal(callbacks, 3);
  assert.equal(q2.size, 0);
});

Deno.test("timer queue: a callback that throws stops no other timer", () => {
  const m = manualHost();
  const q = new TimerQueue(m.host);
  const fired: string[] = [];
  q.add(10, () => {
    throw new Error("boom");
  });
  q.add(20, () => fired.push("after"));
  assert.throws(() => m.advance(15), /boom/);
  m.advance(30);
  assert.deepEqual(fired, ["after"]);
});

Deno.test("timer queue: a thousand random adds and cancels fire exactly the pending ones, in order", () => {
  const m = manualHost();
  const q = new TimerQueue(m.host);
  // A fixed linear congruential sequence: the same run every time.
  let seed = 41;
  const random = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
  const fired: number[] = [];
  const live = new Map<number, ReturnType<typeof q.add>>();
  for (let i = 0; i < 1_000; i++) {
    if (live.size && random(3) === 0) {
      const [id, entry] = [...live][random(live.size)]!;
      q.remove(entry);
      live.delete(id);
    } else {
      live.set(i, q.add(random(500), () => fired.push(i)));
    }
  }
  const expected = [...live].sort((a, b) => a[1].at - b[1].at || a[1].seq - b[1].seq)
    .map(([id]) => id);
  m.advance(1_000);
  assert.deepEqual(fired, expected);
  assert.equal(m.armed(), 0);
});
