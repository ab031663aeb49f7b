import type { Clock } from "../runtime/clock.ts";
import { nextInLine, type Waiter } from "./fair_share.ts";

/**
 * Live-request slots per upstream (`max_in_flight`), shared fairly between gateway keys
 * (docs/design.md "Failover before content"). A freed slot is handed straight to the waiter
 * `nextInLine` picks (the key holding the fewest of that upstream's slots), so no newcomer can
 * take it in between, and while anyone waits a newcomer never jumps the line. A waiter that
 * gives up holds nothing.
 */
export class Slots {
  #inFlight = new Map<string, number>();
  #holders = new Map<string, Map<string | null, number>>();
  #waiters = new Map<string, Waiter[]>();
  #arrivals = 0;

  constructor(private clock: Clock) {}

  inFlight(upstream: string): number {
    return this.#inFlight.get(upstream) ?? 0;
  }

  /** Slots of `upstream` held by requests of one key (null: requests without a key). */
  heldBy(upstream: string, key: string | null): number {
    return this.#holders.get(upstream)?.get(key) ?? 0;
  }

  /** Takes a slot now or answers null: none is free, or others wait for one. */
  tryAcquire(
    upstream: string,
    max: number,
    opts: { key?: string | null } = {},
  ): (() => void) | null {
    this.#handOut(upstream);
    if (this.#waiters.get(upstream)?.length) return null;
    if (this.inFlight(upstream) >= max) return null;
    return this.#take(upstream, opts.key ?? null);
  }

  /** Waits up to `waitMs` (scaled) for a slot; null when none came or the signal fired. */
  acquire(
    upstream: string,
    max: number,
    opts: { waitMs: number; signal: AbortSignal; key?: string | null },
  ): Promise<(() => void) | null> {
    const key = opts.key ?? null;
    const now = this.tryAcquire(upstream, max, { key });
    if (now || opts.signal.aborted || opts.waitMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const list = this.#waiters.get(upstream) ?? [];
      this.#waiters.set(upstream, list);
      const giveUp = () => {
        const at = list.indexOf(waiter);
        if (at < 0) return; // already handed a slot
        list.splice(at, 1);
        done(null);
      };
      const waiter: Waiter = {
        key,
        max,
        arrival: this.#arrivals++,
        grant: () => done(this.#take(upstream, key)),
      };
      const cancel = this.clock.after(opts.waitMs, giveUp);
      const done = (release: (() => void) | null) => {
        cancel();
        opts.signal.removeEventListener("abort", giveUp);
        resolve(release);
      };
      opts.signal.addEventListener("abort", giveUp);
      list.push(waiter);
    });
  }

  #take(upstream: string, key: string | null): () => void {
    this.#inFlight.set(upstream, this.inFlight(upstream) + 1);
    const holders = this.#holders.get(upstream) ?? new Map<string | null, number>();
    this.#holders.set(upstream, holders);
    holders.set(key, (holders.get(key) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight.set(upstream, this.inFlight(upstream) - 1);
      const left = (holders.get(key) ?? 1) - 1;
      if (left > 0) holders.set(key, left);
      else holders.delete(key);
      this.#handOut(upstream);
    };
  }

  /** Free slots go to waiters, next in line first, for as long as both last. */
  #handOut(upstream: string): void {
    const list = this.#waiters.get(upstream);
    while (list?.length) {
      const holders = this.#holders.get(upstream) ?? new Map<string | null, number>();
      const at = nextInLine(list, holders);
      const next = list[at]!;
      if (this.inFlight(upstream) >= next.max) return;
      list.splice(at, 1);
      next.grant();
    }
  }
}
