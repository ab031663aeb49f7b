import type { PoolMember, PoolPick, Upstream } from "../config/schema.ts";
import type { PoolState } from "./pool_state.ts";

/** What a pick may read besides the pool's own measurements. */
export interface PickContext {
  upstreams: ReadonlyMap<string, Upstream>;
  slots: { inFlight(upstream: string): number };
  /** Uniform in [0, 1): Math.random in production, a seeded generator under test. */
  random: () => number;
}

/**
 * least_latency scores a member by the time to its first content plus this many content tokens
 * at its measured rate: what a short answer costs the caller.
 */
export const LATENCY_TOKENS = 100;
/** least_latency: members within this share of the fastest (or LATENCY_SLACK_MS) count as equal. */
export const LATENCY_BAND = 0.25;
export const LATENCY_SLACK_MS = 50;
/** least_latency's exploration share when the pool does not set `explore_share`. */
export const DEFAULT_EXPLORE_SHARE = 0.03;

interface Pick {
  /** Lower is better; written into `state.scores`. */
  score(state: PoolState, ctx: PickContext): void;
  /** Whether a member scoring `score` is as good as the best, `best`. */
  equal(best: number, score: number): boolean;
  /** Sends a share of picks to the member measured longest ago outside the best. */
  explores?: true;
}

/**
 * The picks of docs/design.md "Pools", as data: each scores the members, members the pick finds
 * equal share by weight, and the rest follow best first.
 */
const PICKS: Record<PoolPick, Pick> = {
  weighted: { score: (state) => state.scores.fill(0), equal: () => true },
  least_latency: {
    score: latencyScores,
    equal: (best, score) => score - best <= Math.max(best * LATENCY_BAND, LATENCY_SLACK_MS),
    explores: true,
  },
  least_busy: {
    score: (state, ctx) =>
      state.entry.pool.forEach((m, i) => {
        const max = ctx.upstreams.get(m.upstream)?.max_in_flight ?? 1;
        state.scores[i] = (ctx.slots.inFlight(m.upstream) + failingSlots(state, { i, max })) / max;
      }),
    equal: (best, score) => score === best,
  },
  cheapest: {
    score: (state, ctx) => state.entry.pool.forEach((m, i) => (state.scores[i] = priceOf(m, ctx))),
    equal: (best, score) => score === best,
  },
};

/**
 * The order a request tries a pool's members in (indices into `entry.pool`): best first by the
 * pool's pick, members it finds equal in a random order weighted by `weight`; for
 * least_latency, a share of picks led by the member measured longest ago.
 */
export function orderMembers(state: PoolState, ctx: PickContext): number[] {
  const pick = PICKS[state.entry.pick];
  pick.score(state, ctx);
  const { scores } = state;
  const order = state.entry.pool.map((_, i) => i);
  order.sort((a, b) => scores[a]! - scores[b]! || a - b);
  for (let start = 0; start < order.length;) {
    const best = scores[order[start]!]!;
    let end = start + 1;
    while (end < order.length && pick.equal(best, scores[order[end]!]!)) end++;
    if (end - start > 1) shuffleByWeight(order, { start, end, state, random: ctx.random });
    start = end;
  }
  if (pick.explores) explore(order, state, pick);
  return order;
}

/** order[start..end) put in a random order where each member comes first in proportion to its weight. */
function shuffleByWeight(
  order: number[],
  opts: { start: number; end: number; state: PoolState; random: () => number },
): void {
  const { pool } = opts.state.entry;
  let total = 0;
  for (let i = opts.start; i < opts.end; i++) total += pool[order[i]!]!.weight;
  for (let i = opts.start; i < opts.end - 1; i++) {
    let r = opts.random() * total;
    let j = i;
    while (j < opts.end - 1 && r >= pool[order[j]!]!.weight) r -= pool[order[j++]!]!.weight;
    const chosen = order[j]!;
    order[j] = order[i]!;
    order[i] = chosen;
    total -= pool[chosen]!.weight;
  }
}

/**
 * least_latency: each pick earns `explore_share` of a credit; a whole one sends this pick first
 * to the member outside the best measured longest ago, so one that recovered is seen to.
 * Counted, not drawn: the share holds exactly, and a recovery is noticed within 1 / share picks.
 */
function explore(order: number[], state: PoolState, pick: Pick): void {
  const share = state.entry.explore_share ?? DEFAULT_EXPLORE_SHARE;
  state.exploreCredit = Math.min(1, state.exploreCredit + share);
  if (state.exploreCredit < 1) return;
  const best = state.scores[order[0]!]!;
  let stalest = -1;
  for (let k = 1; k < order.length; k++) {
    const i = order[k]!;
    if (pick.equal(best, state.scores[i]!)) continue;
    if (stalest < 0 || state.members[i]!.latencyAt < state.members[order[stalest]!]!.latencyAt) {
      stalest = k;
    }
  }
  if (stalest < 0) return; // every member is as fast as the best: nothing to explore
  state.exploreCredit -= 1;
  order.unshift(...order.splice(stalest, 1));
}

/**
 * Time to first content plus LATENCY_TOKENS at the member's rate, when every measured member
 * has a rate (a pool of whole answers is scored on first content alone). A member not yet
 * measured scores as the best measured one, so it gets its share and is measured.
 */
function latencyScores(state: PoolState): void {
  const { members, scores } = state;
  const withRate = members.every((m) => m.firstContentMs === null || m.tokensPerSec !== null);
  let best = Infinity;
  members.forEach((m, i) => {
    const first = m.firstContentMs;
    scores[i] = first === null ? NaN : first +
      (withRate && m.tokensPerSec ? LATENCY_TOKENS * 1000 / m.tokensPerSec : 0);
    if (scores[i]! < best) best = scores[i]!;
  });
  const unmeasured = best === Infinity ? 0 : best;
  members.forEach((_, i) => {
    if (Number.isNaN(scores[i])) scores[i] = unmeasured;
  });
}

/**
 * least_busy: a member whose hops fail before content holds no slot while it fails, so it looked
 * the least busy of all and took nearly every first pick (docs/design.md "Pools"). Its failure
 * rate counts as that share of its `max_in_flight` in use, in whole slots, so a member that
 * failed long ago (whose rate has faded under half a slot) is again equal to a healthy one.
 */
function failingSlots(state: PoolState, opts: { i: number; max: number }): number {
  return Math.round(state.failing(opts.i) * opts.max);
}

/** USD per million input plus output tokens for the member's model; unpriced: last. */
function priceOf(member: PoolMember, ctx: PickContext): number {
  const price = ctx.upstreams.get(member.upstream)?.prices?.[member.model];
  return price ? price.input + price.output : Infinity;
}
