import type { Clock } from "../runtime/clock.ts";

/**
 * Live-request slots per upstream (`max_in_flight`). A waiter is woken the
 * moment a slot frees, and a waiter that gives up holds nothing.
 */
export class Slots {
  #inFlight = new Map<string, number>();
  #waiters = new Map<string, Array<() => void>>();

  constructor(private clock: Clock) {}

  inFlight(upstream: string): number {
    return this.#inFlight.get(upstream) ?? 0;
  }

  /** Takes a slot now or answers null. */
  tryAcquire(upstream: string, max: number): (() => void) | null {
    const used = this.inFlight(upstream);
    if (used >= max) return null;
    this.#inFlight.set(upstream, used + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight.set(upstream, this.inFlight(upstream) - 1);
      this.#waiters.get(upstream)?.shift()?.();
    };
  }

  /** Waits up to `waitMs` (scaled) for a slot; null when none came or the signal fired. */
  async acquire(
    upstream: string,
    max: number,
    opts: { waitMs: number; signal: AbortSignal },
  ): Promise<(() => void) | null> {
    const deadline = this.clock.now() + opts.waitMs * this.clock.scale;
    for (;;) {
      const release = this.tryAcquire(upstream, max);
      if (release) return release;
      const left = (deadline - this.clock.now()) / this.clock.scale;
      if (left <= 0 || opts.signal.aborted) return null;
      await this.#wake(upstream, { waitMs: left, signal: opts.signal });
    }
  }

  #wake(upstream: string, opts: { waitMs: number; signal: AbortSignal }): Promise<void> {
    return new Promise((resolve) => {
      const list = this.#waiters.get(upstream) ?? [];
      this.#waiters.set(upstream, list);
      const done = () => {
        cancel();
        opts.signal.removeEventListener("abort", done);
        const at = list.indexOf(done);
        if (at >= 0) list.splice(at, 1);
        resolve();
      };
      const cancel = this.clock.after(opts.waitMs, done);
      opts.signal.addEventListener("abort", done, { once: true });
      list.push(done);
    });
  }
}
