import type { FenceKind, FenceRow } from "../../db/fence_store.ts";

export type { FenceKind, FenceRow };

/** A fence as this process holds it: the stored row. */
export type Fence = FenceRow;

/** Active fences one gateway key may hold (its own aborts, and the operator's of its requests). */
export const MAX_FENCES_PER_KEY = 100;
/** Active fences in all, every key's and the operator's every-key session fences. */
export const MAX_FENCES = 10_000;

/** The bucket of fences that refuse every key's requests (key null). */
const EVERY_KEY = "\u0000every";

const bucket = (keyId: string | null) => keyId ?? EVERY_KEY;

/**
 * The fences this process enforces (docs/design.md "Abort and disconnect"), indexed for the
 * admission path: a session fence is found by its session, a turn fence by its key, so a
 * request pays one map lookup per kind, and the turn's fingerprint is computed only when its key
 * has a turn fence at all (`mayHaveTurnFence`). Synchronous: no database read per request.
 *
 * Bounded: at most `perKey` active fences per key (fences of every key, the operator's, count
 * only in the total) and `total` in all. A new fence beyond a bound evicts the one that would
 * expire first, the oldest of its kind: the operator's latest abort is the one that matters, and
 * one that is refused could not be seen to work.
 *
 * A fence is in force while `now < expiresAt` and not lifted: at `expiresAt` itself it is over.
 */
export class FenceSet {
  #byId = new Map<string, Fence>();
  /** Session fences by session id. */
  #sessions = new Map<string, Set<Fence>>();
  /** Turn fences by key bucket. */
  #turns = new Map<string, Set<Fence>>();
  /** Every fence by key bucket, for the per-key bound. */
  #perKey = new Map<string, Set<Fence>>();
  readonly #max: { perKey: number; total: number };

  constructor(opts: { perKey?: number; total?: number } = {}) {
    this.#max = { perKey: opts.perKey ?? MAX_FENCES_PER_KEY, total: opts.total ?? MAX_FENCES };
  }

  get size(): number {
    return this.#byId.size;
  }

  get(id: string): Fence | undefined {
    return this.#byId.get(id);
  }

  /**
   * Holds a fence (a new one, or one read from the database or a peer), replacing any of the
   * same id; a lifted or expired one is dropped instead. Answers the fences evicted to keep the
   * bounds.
   */
  put(fence: Fence, now: number): Fence[] {
    this.#drop(fence.id);
    if (fence.liftedAt !== null || fence.expiresAt <= now) return [];
    // A second abort of the same scope renews the fence rather than piling a second on it, so
    // one lift undoes it (the store lifts the older row alike: db/fence_store.ts).
    const index = fence.kind === "session" ? this.#sessions : this.#turns;
    const at = fence.kind === "session" ? fence.sessionId ?? "" : bucket(fence.keyId);
    for (const held of index.get(at) ?? []) {
      if (sameScope(held, fence) && held.createdAt <= fence.createdAt) this.#drop(held.id);
    }
    this.#byId.set(fence.id, fence);
    addTo(index, at, fence);
    addTo(this.#perKey, bucket(fence.keyId), fence);
    const evicted: Fence[] = [];
    const own = this.#perKey.get(bucket(fence.keyId))!;
    if (fence.keyId !== null && own.size > this.#max.perKey) evicted.push(this.#evict(own, now));
    if (this.#byId.size > this.#max.total) evicted.push(this.#evict(this.#byId.values(), now));
    return evicted;
  }

  /** Takes a fence out (lifted); false when it was not held. */
  lift(id: string): boolean {
    return this.#drop(id);
  }

  /** The session fence in force for a request of `keyId` in `sessionId`, if any. */
  sessionFence(sessionId: string, keyId: string | null, now: number): Fence | null {
    const fences = this.#sessions.get(sessionId);
    if (!fences) return null;
    return this.#first(fences, now, (f) => f.keyId === null || f.keyId === keyId);
  }

  /**
   * Whether a turn fence may apply to `keyId`'s requests: only then is a request's fingerprint
   * worth computing. May answer true for a fence that has just expired (the sweep drops it).
   */
  mayHaveTurnFence(keyId: string | null): boolean {
    return this.#turns.has(bucket(keyId)) || this.#turns.has(EVERY_KEY);
  }

  /** The turn fence in force for this request of `keyId` in `sessionId`, if any. */
  turnFence(
    turn: { keyId: string | null; sessionId: string | null; fingerprint: string },
    now: number,
  ): Fence | null {
    const matches = (f: Fence) =>
      f.fingerprint === turn.fingerprint && f.sessionId === turn.sessionId;
    for (const at of new Set([bucket(turn.keyId), EVERY_KEY])) {
      const fences = this.#turns.get(at);
      const found = fences ? this.#first(fences, now, matches) : null;
      if (found) return found;
    }
    return null;
  }

  /** The fences in force, expiring last first. */
  active(now: number): Fence[] {
    this.sweep(now);
    return [...this.#byId.values()].sort((a, b) => b.expiresAt - a.expiresAt);
  }

  /** Active fences by kind (the gauge). */
  counts(now: number): Record<FenceKind, number> {
    this.sweep(now);
    let session = 0;
    for (const f of this.#byId.values()) if (f.kind === "session") session++;
    return { session, turn: this.#byId.size - session };
  }

  /** Drops the fences that are over by `now`. */
  sweep(now: number): void {
    for (const fence of [...this.#byId.values()]) if (fence.expiresAt <= now) this.#drop(fence.id);
  }

  #first(fences: Set<Fence>, now: number, matches: (f: Fence) => boolean): Fence | null {
    for (const fence of fences) {
      if (fence.expiresAt <= now) {
        this.#drop(fence.id);
        continue;
      }
      if (matches(fence)) return fence;
    }
    return null;
  }

  /** The fence expiring first (an expired one first of all) goes. */
  #evict(fences: Iterable<Fence>, now: number): Fence {
    let first: Fence | null = null;
    for (const f of fences) {
      if (first === null || f.expiresAt < first.expiresAt) first = f;
      if (f.expiresAt <= now) break;
    }
    this.#drop(first!.id);
    return first!;
  }

  #drop(id: string): boolean {
    const fence = this.#byId.get(id);
    if (!fence) return false;
    this.#byId.delete(id);
    const index = fence.kind === "session" ? this.#sessions : this.#turns;
    removeFrom(
      index,
      fence.kind === "session" ? fence.sessionId ?? "" : bucket(fence.keyId),
      fence,
    );
    removeFrom(this.#perKey, bucket(fence.keyId), fence);
    return true;
  }
}

/** Whether two fences refuse the same requests. */
function sameScope(a: Fence, b: Fence): boolean {
  return a.kind === b.kind && a.keyId === b.keyId && a.sessionId === b.sessionId &&
    a.fingerprint === b.fingerprint;
}

function addTo(index: Map<string, Set<Fence>>, at: string, fence: Fence): void {
  const set = index.get(at);
  if (set) set.add(fence);
  else index.set(at, new Set([fence]));
}

function removeFrom(index: Map<string, Set<Fence>>, at: string, fence: Fence): void {
  const set = index.get(at);
  if (!set) return;
  set.delete(fence);
  if (!set.size) index.delete(at);
}
