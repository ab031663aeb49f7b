/**
 * Who gets an upstream's next free slot when requests wait for it (docs/design.md "Failover
 * before content", docs/security.md "Request bodies and per-key concurrency"): the waiter
 * whose gateway key holds the fewest of that upstream's slots, and among those the one that
 * came first. So a key with many requests running or waiting gets the next slot only when no
 * waiting key holds fewer: under contention each key's share tends to an equal part of
 * `max_in_flight`, and one key's queue never stands between another key and the upstream.
 */

/** Slots of one upstream held per gateway key (null: requests without a key). */
export type Holders = ReadonlyMap<string | null, number>;

export interface Waiter {
  key: string | null;
  /** The upstream's `max_in_flight` as the waiter's config saw it. */
  max: number;
  /** Order of arrival, for ties. */
  arrival: number;
  /** Hands this waiter a slot. */
  grant(): void;
}

/** The index in `waiters` (kept in arrival order) of the one to serve next. */
export function nextInLine(waiters: readonly Waiter[], holders: Holders): number {
  let best = 0;
  let fewest = Infinity;
  for (const [i, w] of waiters.entries()) {
    const held = holders.get(w.key) ?? 0;
    // Strictly fewer: an equal count keeps the earlier arrival.
    if (held < fewest) {
      fewest = held;
      best = i;
    }
  }
  return best;
}
