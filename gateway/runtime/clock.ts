import { type TimerHost, TimerQueue } from "./timer_queue.ts";

/**
 * The one place the gateway waits and reads the time (docs/architecture.md "Time"). Every
 * component is handed a `Clock`: the system clock when served, a virtual clock in tests
 * (tests/virtual_clock.ts), which runs a 300 s idle timeout at exactly 300 s in microseconds.
 *
 * Durations are clock milliseconds, as configured. `now()` is epoch milliseconds, for
 * timestamps other processes read; the distance between two `now()` values, or a point
 * `ms` ahead, is asked of the clock (`elapsed`, `deadline`), never computed by hand, so a
 * clock whose time runs at another pace (`PULSEGATE_TIME_SCALE`, SPEC §2) stays correct.
 * Its methods may be called detached (`now: clock.now`).
 */
export interface Clock {
  /** Epoch milliseconds: what history rows, fences and heartbeats store. */
  now(): number;
  /**
   * Runs `fn` after `ms` of clock time. Returns a cancel function. `unref`: the timer does not
   * keep the process alive (a log line's quiet period).
   */
  after(ms: number, fn: () => void, opts?: { unref?: boolean }): () => void;
  /** Resolves after `ms` of clock time; rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** The `now()` value at which `ms` of clock time will have passed since `from` (default now). */
  deadline(ms: number, from?: number): number;
  /** Clock milliseconds between two `now()` values (`until` defaults to now). */
  elapsed(since: number, until?: number): number;
}

/** The runtime's timers, behind the system clocks' queues; monotonic time for their deadlines. */
const RUNTIME_TIMERS: TimerHost<ReturnType<typeof setTimeout>> = {
  now: () => performance.now(),
  arm: (ms, fire) => setTimeout(fire, ms),
  disarm: (handle) => clearTimeout(handle),
};

/**
 * The system clock. `scale` is `PULSEGATE_TIME_SCALE`, kept for black-box suites and operators
 * who run a whole process faster (SPEC §2): each clock millisecond lasts `scale` real ones. It is
 * read here and nowhere else; `now()` stays the real epoch so processes agree on timestamps.
 */
export function systemClock(scale = 1): Clock {
  if (!(scale > 0)) throw new RangeError(`time scale must be positive, got ${scale}`);
  const real = (ms: number) => Math.max(0, ms * scale);
  // One runtime timer for all of this clock's (timer_queue.ts).
  const timers = new TimerQueue(RUNTIME_TIMERS);
  return {
    now: () => Date.now(),
    after(ms, fn, opts) {
      if (opts?.unref) {
        // Rare (a log line's quiet period): its own runtime timer, which alone can be unref'd.
        const id = setTimeout(fn, real(ms));
        Deno.unrefTimer(id);
        return () => clearTimeout(id);
      }
      const entry = timers.add(real(ms), fn);
      return () => timers.remove(entry);
    },
    sleep(ms, signal) {
      return new Promise((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const onAbort = () => {
          timers.remove(entry);
          reject(signal?.reason);
        };
        const entry = timers.add(real(ms), () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        });
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
    deadline: (ms, from = Date.now()) => from + ms * scale,
    elapsed: (since, until = Date.now()) => (until - since) / scale,
  };
}

/**
 * The span of `now()` values that `ms` of clock time covers: what a window of clock time is
 * compared with where timestamps are stored (the instances table, fences kept after they end).
 */
export function nowSpan(clock: Clock, ms: number): number {
  const now = clock.now();
  return clock.deadline(ms, now) - now;
}

/**
 * Real time, unscaled, for bounds on the process's own work (a SQLite read, a worker's start, a
 * socket write): a scaled or virtual clock must not shorten those, since the work does not.
 */
export const REAL_TIME: Clock = systemClock(1);

/**
 * Monotonic milliseconds for measuring the process's own work (a batch write, a loop turn):
 * never a liveness wait, which goes through a `Clock`.
 */
export function workMs(): number {
  return performance.now();
}

/** Runs `run` every `ms` of `clock` time until the answered cancel is called. */
export function repeatEvery(
  ms: number,
  opts: { clock: Clock; run: () => void; unref?: boolean },
): () => void {
  let cancel = () => {};
  let stopped = false;
  const arm = () => {
    cancel = opts.clock.after(ms, () => {
      if (stopped) return;
      arm();
      opts.run();
    }, { unref: opts.unref });
  };
  arm();
  return () => {
    stopped = true;
    cancel();
  };
}
