import type { PoolEntry, PoolMember } from "../config/schema.ts";

/** Pool hops the traffic share is read over (docs/admin.md "Health"). */
export const SHARE_WINDOW = 200;
/**
 * How fast a member's estimates forget, in hops into its pool: a sample taken `age` hops after
 * the member's previous one weighs 1 - e^(-age/4). A member measured on nearly every hop
 * moves a fifth of the way to each sample (a smooth estimate); one measured again only after
 * 20 hops (an explored member) is taken at what it measures now (docs/design.md "Pools").
 */
const FORGET_HOPS = 4;

/** What the gateway has measured of one member, in configured (unscaled) units. */
export interface MemberStats {
  /** `[upstream, model]`: a member is known by these across config reloads. */
  readonly id: string;
  /** EWMA of the time to first content, ms; null until measured. */
  firstContentMs: number | null;
  /** EWMA of content tokens per second after the first content; null until measured. */
  tokensPerSec: number | null;
  /**
   * EWMA of its hops' outcome before content, 1 a failure charged to it and 0 a first content;
   * null until measured. least_busy counts it as slots in use (pool_picks.ts).
   */
  failureRate: number | null;
  /** The pool's hop count at its last first-content (or failure) sample. */
  latencyAt: number;
  /** The pool's hop count at its last tokens/s sample. */
  throughputAt: number;
}

export function memberId(member: Pick<PoolMember, "upstream" | "model">): string {
  return JSON.stringify([member.upstream, member.model]);
}

/**
 * One pool of one route in this process: its members' measurements, its exploration credit and
 * which member each of its last SHARE_WINDOW hops went to. Fixed-size state; nothing here
 * allocates per request.
 */
export class PoolState {
  /** The entry's place in its route's candidates. */
  readonly index: number;
  entry: PoolEntry;
  members: MemberStats[];
  /** Hops into the pool so far: the clock estimates age by. */
  hops = 0;
  /** least_latency: grows by `explore_share` per pick; at 1 a pick explores. */
  exploreCredit = 0;
  /** Per member, scratch for one pick (synchronous, so one set serves every request). */
  readonly scores: Float64Array;
  /** Per member, what a candidate from this pool carries (made once, shared by requests). */
  readonly slots: { readonly state: PoolState; readonly member: number }[];
  #ring = new Uint8Array(SHARE_WINDOW);
  #filled = 0;
  #next = 0;
  #counts: Uint32Array;

  constructor(readonly route: string, opts: { index: number; entry: PoolEntry }) {
    this.index = opts.index;
    this.entry = opts.entry;
    this.members = opts.entry.pool.map((m) => freshStats(memberId(m)));
    this.scores = new Float64Array(this.members.length);
    this.slots = this.members.map((_, member) => ({ state: this, member }));
    this.#counts = new Uint32Array(this.members.length);
  }

  /**
   * A config reload gave the pool's place a new entry: measurements follow their member (by
   * upstream and model); the share window starts over when the members changed.
   */
  adopt(entry: PoolEntry): PoolState {
    if (entry === this.entry) return this;
    const ids = entry.pool.map(memberId);
    const same = ids.length === this.members.length &&
      ids.every((id, i) => id === this.members[i]!.id);
    this.entry = entry;
    if (same) return this;
    const old = new Map(this.members.map((m) => [m.id, m]));
    const next = new PoolState(this.route, { index: this.index, entry });
    next.members = ids.map((id) => old.get(id) ?? freshStats(id));
    next.hops = this.hops;
    return next;
  }

  /** A hop went to `member`: counted in the share window, and ages the estimates. */
  hop(member: number): void {
    this.hops++;
    if (this.#filled === SHARE_WINDOW) this.#counts[this.#ring[this.#next]!]!--;
    else this.#filled++;
    this.#ring[this.#next] = member;
    this.#counts[member]!++;
    this.#next = (this.#next + 1) % SHARE_WINDOW;
  }

  /** The member's share of the pool's last SHARE_WINDOW hops; null before any hop. */
  share(member: number): number | null {
    return this.#filled === 0 ? null : (this.#counts[member] ?? 0) / this.#filled;
  }

  /** The hops the share is read over (up to SHARE_WINDOW). */
  get window(): number {
    return this.#filled;
  }

  /** Its first content came `ms` after the hop was sent. */
  firstContent(member: number, ms: number): void {
    const m = this.members[member];
    if (m) this.#sample(m, { ms, failed: 0 });
  }

  /**
   * It failed before content, `ms` after it was sent: taken as a sample at least twice its
   * estimate, so a failing member falls behind the others before cooldown pauses it.
   */
  failed(member: number, ms: number): void {
    const m = this.members[member];
    if (m) this.#sample(m, { ms: Math.max(ms, 2 * (m.firstContentMs ?? ms)), failed: 1 });
  }

  /**
   * The member's failure rate as it stands now: faded by the pool's hops since its last sample,
   * as an estimate forgets, so a member the pick passed over for it is tried again within a
   * few hops into the pool rather than never (docs/design.md "Pools").
   */
  failing(member: number): number {
    const m = this.members[member];
    if (!m?.failureRate) return 0;
    return m.failureRate * Math.exp(-(this.hops - m.latencyAt) / FORGET_HOPS);
  }

  #sample(m: MemberStats, sample: { ms: number; failed: 0 | 1 }): void {
    const age = this.hops - m.latencyAt;
    m.firstContentMs = blend(m.firstContentMs, sample.ms, age);
    m.failureRate = blend(m.failureRate, sample.failed, age);
    m.latencyAt = this.hops;
  }

  /** It finished: `tokens` content tokens in `ms` after its first content. */
  answered(member: number, opts: { tokens: number; ms: number }): void {
    const m = this.members[member];
    // One token or an instant answer (a whole answer) says nothing about the rate.
    if (!m || opts.tokens < 2 || opts.ms < 1) return;
    const rate = opts.tokens * 1000 / opts.ms;
    m.tokensPerSec = blend(m.tokensPerSec, rate, this.hops - m.throughputAt);
    m.throughputAt = this.hops;
  }
}

function freshStats(id: string): MemberStats {
  return {
    id,
    firstContentMs: null,
    tokensPerSec: null,
    failureRate: null,
    latencyAt: 0,
    throughputAt: 0,
  };
}

function blend(estimate: number | null, sample: number, age: number): number {
  if (estimate === null) return sample;
  const weight = 1 - Math.exp(-Math.max(1, age) / FORGET_HOPS);
  return estimate + weight * (sample - estimate);
}
