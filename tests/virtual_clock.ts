import { setImmediate } from "node:timers";
import type { Clock } from "../gateway/runtime/clock.ts";
import { turnsPending } from "../gateway/runtime/loop_turn.ts";

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * The gateway's one clock (gateway/runtime/clock.ts) in virtual time, for
 * tests where the network is not the point. Nothing fires by itself: `run`
 * drives a promise to its end, letting every pending callback and microtask
 * settle, then jumping to the next timer, and so on; a test of a 30 s idle
 * timeout takes microseconds and fires at exactly 30 000 ms.
 */
export class VirtualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: Timer[] = [];

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  // Arrow properties: a clock's methods are handed around detached (`now: clock.now`).
  now = (): number => this.#now;

  after = (ms: number, fn: () => void): () => void => {
    const timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      const at = this.#timers.indexOf(timer);
      if (at >= 0) this.#timers.splice(at, 1);
    };
  };

  sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
    new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        cancel();
        reject(signal?.reason);
      };
      const cancel = this.after(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });

  deadline = (ms: number, from = this.#now): number => from + ms;

  elapsed = (since: number, until = this.#now): number => until - since;

  /**
   * Moves the time `ms` ahead, firing every timer due on the way in order, each at its own
   * instant (synchronously: for code under test that does not await between timers).
   */
  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.#timers[0];
      if (!next || next.at > until) break;
      this.#fireNext();
    }
    this.#now = until;
  }

  #busy: (() => boolean) | null = null;

  /**
   * Virtual time stands still while `busy` answers true: real work of the code under test that
   * no virtual timer stands for (a hash or a signature on the runtime's own threads) ends first,
   * so the instants around it stay exact. `run` waits real loop turns meanwhile.
   */
  holdWhile(busy: () => boolean): void {
    this.#busy = busy;
  }

  /** Virtual ms since the clock started (for readable assertions). */
  get sinceStart(): number {
    return this.#now - 1_700_000_000_000;
  }

  /** Fires the timers due at the next instant any is due; false when none is pending. */
  #fireNext(): boolean {
    if (!this.#timers.length) return false;
    this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
    const at = this.#timers[0]!.at;
    this.#now = Math.max(this.#now, at);
    const due = this.#timers.filter((t) => t.at <= at);
    this.#timers = this.#timers.filter((t) => t.at > at);
    for (const timer of due) timer.fn();
    return true;
  }

  /**
   * Runs `work` to its end in virtual time. Throws if it can never end
   * (nothing pending and not settled), or runs past `limitMs` of virtual time.
   */
  async run<T>(work: Promise<T>, opts: { limitMs?: number } = {}): Promise<T> {
    let settled = false;
    // Settled into a value at once: a rejection is handled here, and thrown again below.
    const tracked = work.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ).finally(() => (settled = true));
    const outcome = async (): Promise<T> => {
      const done = await tracked;
      if (done.ok) return done.value;
      throw done.error;
    };
    const limit = this.#now + (opts.limitMs ?? 3_600_000);
    for (;;) {
      // A real macrotask turn lets every callback and microtask queued so far run.
      await macrotask();
      if (settled) return await outcome();
      if (this.#now > limit) throw new Error(`still running after ${opts.limitMs} ms`);
      // The gateway is between two steps of its own work (a large body's parse, a real pause
      // between two writes, gateway/runtime/loop_turn.ts), or busy as `holdWhile` says: no time
      // passes.
      if (turnsPending() > 0 || this.#busy?.()) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        continue;
      }
      if (this.#fireNext()) continue;
      // Nothing virtual is pending: real work of the code under test (a loop turn, a file read,
      // a worker starting) goes first, for up to REAL_GRACE_MS of real time.
      const graceEnds = performance.now() + REAL_GRACE_MS;
      while (!settled && !this.#timers.length && performance.now() < graceEnds) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      if (settled) return await outcome();
      if (!this.#fireNext()) {
        throw new Error("stuck: nothing is pending and the work has not ended");
      }
    }
  }
}

/** How long real work may go on with no virtual timer pending before `run` calls it stuck. */
const REAL_GRACE_MS = 10_000;

/**
 * One real macrotask turn: `setImmediate`, not `setTimeout(0)`, whose nested calls are clamped
 * to milliseconds each, which made a thousand requests in virtual time take seconds.
 */
function macrotask(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
