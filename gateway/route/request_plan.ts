import type { Config, Route, Upstream } from "../config/schema.ts";
import { isPool } from "../config/route_entries.ts";
import { onePer } from "../runtime/memo.ts";
import type { Candidate } from "./route_request.ts";

/**
 * What every request under one config used to work out again, made once per config: configs
 * are immutable (a change is a new config object), so the plan is kept against the object and
 * goes with it. A request looks its route up in a table and walks the route's plan; a stage
 * the plan says the route never uses (a hedge race) costs it nothing.
 */
export interface RequestPlan {
  /** The enabled routes by model name, the first of a name as `config.routes` orders them. */
  routes: ReadonlyMap<string, Route>;
  /** Each route's plan, by the route object of this config. */
  byRoute: ReadonlyMap<Route, RoutePlan>;
}

export interface RoutePlan {
  /**
   * The route's candidates when it has no pool, each with its upstream, in config order; only
   * those enabled (and whose upstream exists and is enabled). Shared by every request: a
   * request that must mark one (a probe) marks a copy. Null with a pool, whose pick orders its
   * members per request (docs/design.md "Pools").
   */
  fixed: readonly Candidate[] | null;
  /** Whether any candidate may hedge (docs/liveness.md "Hedged start"): else no race is set up. */
  hedges: boolean;
}

/** A config's upstreams by id, made once per config. */
export const upstreamsById = onePer((config: Config): ReadonlyMap<string, Upstream> =>
  new Map(config.upstreams.map((u) => [u.id, u]))
);

/** The plan of `config`, made on its first request. */
export const requestPlan = onePer((config: Config): RequestPlan => {
  const upstreams = upstreamsById(config);
  const routes = new Map<string, Route>();
  const byRoute = new Map<Route, RoutePlan>();
  for (const route of config.routes) {
    if (route.enabled && !routes.has(route.model)) routes.set(route.model, route);
    byRoute.set(route, routePlan(route, upstreams));
  }
  return { routes, byRoute };
});

function routePlan(route: Route, upstreams: ReadonlyMap<string, Upstream>): RoutePlan {
  let hedges = route.hedge_after_secs !== undefined;
  let fixed: Candidate[] | null = [];
  for (const entry of route.candidates) {
    if (isPool(entry)) {
      if (entry.pool.some((m) => m.hedge_after_secs !== undefined)) hedges = true;
      fixed = null;
      continue;
    }
    if (entry.hedge_after_secs !== undefined) hedges = true;
    if (fixed === null || !entry.enabled) continue;
    const upstream = upstreams.get(entry.upstream);
    if (upstream?.enabled) fixed.push({ upstream, candidate: entry });
  }
  return { fixed, hedges };
}

/** The plan of one route of `config` (made for a route object of another config if need be). */
export function planOf(config: Config, route: Route): RoutePlan {
  return requestPlan(config).byRoute.get(route) ?? routePlan(route, upstreamsById(config));
}
