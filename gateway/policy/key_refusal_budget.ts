import type { RefusalSlot } from "../live/live_request.ts";
import type { Clock } from "../runtime/clock.ts";
import { KEY_REFUSED_ROWS_PER_MINUTE, MinuteAllowance } from "./refused_budget.ts";

/**
 * Keys with an allowance of their own at once. Key ids come from the config, so only a config
 * with more keys than this makes the keys beyond it share one allowance.
 */
export const MAX_TRACKED_KEYS = 10_000;

const MINUTE_MS = 60_000;

/** A place in one key's allowance: held from the start, claimed at the end, or none. */
class Slot implements RefusalSlot {
  /** The minute the place was taken in; null while none is held. */
  #windowStart: number | null;

  readonly #clock: Pick<Clock, "now">;

  constructor(
    private readonly allowance: MinuteAllowance,
    opts: { clock: Pick<Clock, "now">; now: number },
  ) {
    this.#clock = opts.clock;
    this.#windowStart = allowance.take(opts.now);
  }

  get held(): boolean {
    return this.#windowStart !== null;
  }

  claim(): boolean {
    this.#windowStart ??= this.allowance.take(this.#clock.now());
    return this.#windowStart !== null;
  }

  release(): void {
    if (this.#windowStart === null) return;
    this.allowance.giveBack(this.#windowStart);
    this.#windowStart = null;
  }
}

/**
 * Per key, how many requests refused after auth and before any upstream call (rate limited,
 * over budget, bad body, unknown model, forbidden route, ...) still get a history row this
 * minute (docs/security.md "Refused floods"). Each key has its own allowance, so a key's flood
 * never spends another key's; requests refused before auth have the process-wide RefusedBudget.
 *
 * A request takes its place when it is admitted, before anyone knows whether it will be
 * refused, and gives it back once it reaches an upstream; one admitted while the allowance was
 * in use tries again at its end. Every recorded refusal keeps the place it took, so the
 * recorded refusals of a minute never exceed the allowance, however many of the key's requests
 * run at once.
 */
export class KeyRefusalBudget {
  readonly #keys = new Map<string | null, MinuteAllowance>();
  readonly #overflow: MinuteAllowance;
  readonly #perMinute: number;
  readonly #maxKeys: number;
  #lastSweep = -Infinity;

  constructor(
    private readonly clock: Pick<Clock, "now">,
    opts: { perMinute?: number; maxKeys?: number } = {},
  ) {
    this.#perMinute = opts.perMinute ?? KEY_REFUSED_ROWS_PER_MINUTE;
    this.#maxKeys = Math.max(1, opts.maxKeys ?? MAX_TRACKED_KEYS);
    this.#overflow = new MinuteAllowance(this.#perMinute);
  }

  /** A place for one recorded refusal of this key (null: no key, an open proxy), if one is left. */
  reserve(keyId: string | null): RefusalSlot {
    const now = this.clock.now();
    return new Slot(this.#allowanceFor(keyId, now), { clock: this.clock, now });
  }

  /** Keys tracked now (bounded by `maxKeys`). */
  get size(): number {
    return this.#keys.size;
  }

  #allowanceFor(keyId: string | null, now: number): MinuteAllowance {
    const known = this.#keys.get(keyId);
    if (known) return known;
    if (this.#keys.size >= this.#maxKeys) this.#forgetIdle(now);
    if (this.#keys.size >= this.#maxKeys) return this.#overflow;
    const allowance = new MinuteAllowance(this.#perMinute);
    this.#keys.set(keyId, allowance);
    return allowance;
  }

  /** Keys whose minute is over (removed from the config, or quiet) need no memory. */
  #forgetIdle(now: number): void {
    // At most once a minute: with every slot in use, a sweep per request would cost O(keys).
    if (now - this.#lastSweep < MINUTE_MS) return;
    this.#lastSweep = now;
    for (const [keyId, allowance] of this.#keys) {
      if (allowance.idle(now)) this.#keys.delete(keyId);
    }
  }
}
