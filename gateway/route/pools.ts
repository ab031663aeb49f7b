import type { Config, PoolEntry, PoolMember, Route, Upstream } from "../config/schema.ts";
import { isPool } from "../config/route_entries.ts";
import { orderMembers, type PickContext } from "./pool_picks.ts";
import { PoolState } from "./pool_state.ts";
import { upstreamsById } from "./request_plan.ts";

/** A candidate that came out of a pool: its pool's state, and which member it is. */
export interface PoolSlot {
  state: PoolState;
  member: number;
}

/** One member of a pool ordered for a request. */
export interface MemberCandidate {
  upstream: Upstream;
  candidate: PoolMember;
  pool: PoolSlot;
}

/** A pool as the admin page and /metrics show it. */
export interface PoolView {
  route: string;
  /** Its place in the route's candidates. */
  index: number;
  pick: PoolEntry["pick"];
  /** Hops the shares are read over. */
  window: number;
  members: {
    upstream: string;
    model: string;
    weight: number;
    /** Share of the pool's last `window` hops; null before any. */
    share: number | null;
    /** least_latency's estimates, configured ms and tokens/s; null until measured. */
    firstContentMs: number | null;
    tokensPerSec: number | null;
  }[];
}

/**
 * Every pool's state in this process (docs/design.md "Pools"; per process, like slots:
 * docs/scaling.md), found by route and place so a config reload keeps what was measured.
 */
export class Pools {
  #states = new Map<string, PoolState>();
  /** The state of each entry seen, found without building its key on every request. */
  #byEntry = new WeakMap<PoolEntry, PoolState>();
  #config: Config | null = null;
  /** Reused by every pick: a pick runs to its end synchronously, so one serves all requests. */
  #ctx: PickContext;

  constructor(opts: { random: () => number }) {
    this.#ctx = { upstreams: new Map(), slots: { inFlight: () => 0 }, random: opts.random };
  }

  /**
   * The members of the route's pool at `index`, in the order this request tries them, each with
   * its upstream (members whose upstream is not configured are left out).
   */
  order(
    route: Route,
    opts: { index: number; entry: PoolEntry; config: Config; slots: PickContext["slots"] },
  ): MemberCandidate[] {
    const state = this.state(route.model, opts);
    const ctx = this.#ctx;
    ctx.upstreams = upstreamsById(opts.config);
    ctx.slots = opts.slots;
    const picks: MemberCandidate[] = [];
    for (const member of orderMembers(state, ctx)) {
      const candidate = state.entry.pool[member]!;
      const upstream = ctx.upstreams.get(candidate.upstream);
      if (upstream) picks.push({ upstream, candidate, pool: state.slots[member]! });
    }
    return picks;
  }

  /** The pools of `config`, with their shares and estimates. */
  view(config: Config): PoolView[] {
    return config.routes.flatMap((route) =>
      route.candidates.flatMap((entry, index) => {
        if (!isPool(entry)) return [];
        const state = this.state(route.model, { index, entry, config });
        return [{
          route: route.model,
          index,
          pick: entry.pick,
          window: state.window,
          members: entry.pool.map((m, i) => ({
            upstream: m.upstream,
            model: m.model,
            weight: m.weight,
            share: state.share(i),
            firstContentMs: state.members[i]?.firstContentMs ?? null,
            tokensPerSec: state.members[i]?.tokensPerSec ?? null,
          })),
        }];
      })
    );
  }

  state(route: string, opts: { index: number; entry: PoolEntry; config: Config }): PoolState {
    if (opts.config !== this.#config) this.#forgetRemoved(opts.config);
    const seen = this.#byEntry.get(opts.entry);
    if (seen && seen.route === route && seen.index === opts.index) return seen;
    const key = JSON.stringify([route, opts.index]);
    const known = this.#states.get(key);
    const state = known?.adopt(opts.entry) ?? new PoolState(route, opts);
    if (state !== known) this.#states.set(key, state);
    this.#byEntry.set(opts.entry, state);
    return state;
  }

  /** A new config: the states of pools it no longer has go. */
  #forgetRemoved(config: Config): void {
    this.#config = config;
    const kept = new Set<string>();
    for (const route of config.routes) {
      route.candidates.forEach((entry, index) => {
        if (isPool(entry)) kept.add(JSON.stringify([route.model, index]));
      });
    }
    for (const key of this.#states.keys()) if (!kept.has(key)) this.#states.delete(key);
  }
}
