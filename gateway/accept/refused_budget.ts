import type { Clock } from "../runtime/clock.ts";

/** Refused requests recorded per minute and per process (docs/security.md, "Refused floods"). */
export const REFUSED_ROWS_PER_MINUTE = 60;

const MINUTE_MS = 60_000;

/**
 * How many refused requests (401/403/503 before auth) still get a history row this minute.
 * A flood of them would otherwise cost one row each: the database would grow with the flood and
 * the history writer's queue would fill with rows nobody needs. Beyond the budget a refusal is
 * only counted (`pulsegate_refused_unrecorded_total`).
 *
 * The minute is real time, not scaled by the time scale: it is a rate, not a wait, and a scaled
 * test would otherwise get a new budget every 600 ms.
 */
export class RefusedBudget {
  #windowStart = -Infinity;
  #used = 0;

  constructor(
    private readonly clock: Pick<Clock, "now">,
    private readonly perMinute = REFUSED_ROWS_PER_MINUTE,
  ) {}

  /** True (and one spent) while this minute's budget lasts. */
  take(): boolean {
    const now = this.clock.now();
    if (now - this.#windowStart >= MINUTE_MS) {
      this.#windowStart = now;
      this.#used = 0;
    }
    if (this.#used >= this.perMinute) return false;
    this.#used++;
    return true;
  }
}
