import type { Clock } from "../runtime/clock.ts";

/** Refused requests recorded per minute and per process (docs/security.md, "Refused floods"). */
export const REFUSED_ROWS_PER_MINUTE = 60;

/** Refusals after auth recorded per minute, per key and per process (docs/security.md). */
export const KEY_REFUSED_ROWS_PER_MINUTE = 60;

const MINUTE_MS = 60_000;

/**
 * One minute's count of recorded refusals. The minute is real time, not scaled by the time
 * scale: it is a rate, not a wait, and a scaled test would otherwise get a new budget every
 * 600 ms.
 */
export class MinuteAllowance {
  #windowStart = -Infinity;
  #used = 0;

  constructor(private readonly perMinute: number) {}

  /** The start of the minute one was taken in, or null when this minute's are spent. */
  take(now: number): number | null {
    if (now - this.#windowStart >= MINUTE_MS) {
      this.#windowStart = now;
      this.#used = 0;
    }
    if (this.#used >= this.perMinute) return null;
    this.#used++;
    return this.#windowStart;
  }

  /** Gives back one taken in the minute starting at `windowStart`; a later minute is not its. */
  giveBack(windowStart: number): void {
    if (windowStart === this.#windowStart && this.#used > 0) this.#used--;
  }

  /** Whether its minute is over, so forgetting it changes nothing. */
  idle(now: number): boolean {
    return now - this.#windowStart >= MINUTE_MS;
  }
}

/**
 * How many refused requests (401/403/503 before auth) still get a history row this minute.
 * A flood of them would otherwise cost one row each: the database would grow with the flood and
 * the history writer's queue would fill with rows nobody needs. Beyond the budget a refusal is
 * only counted (`pulsegate_refused_unrecorded_total`).
 */
export class RefusedBudget {
  readonly #allowance: MinuteAllowance;

  constructor(
    private readonly clock: Pick<Clock, "now">,
    perMinute = REFUSED_ROWS_PER_MINUTE,
  ) {
    this.#allowance = new MinuteAllowance(perMinute);
  }

  /** True (and one spent) while this minute's budget lasts. */
  take(): boolean {
    return this.#allowance.take(this.clock.now()) !== null;
  }
}
