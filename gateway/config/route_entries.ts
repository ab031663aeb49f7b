import type { PoolEntry, Route, RouteCandidate, RouteEntry } from "./schema.ts";

/** An entry of `routes[].candidates` that is a pool (docs/design.md "Pools"). */
export function isPool(entry: RouteEntry): entry is PoolEntry {
  return "pool" in entry;
}

/** Every candidate of a route, each pool's members in their place, in config order. */
export function routeMembers(route: Pick<Route, "candidates">): RouteCandidate[] {
  return route.candidates.flatMap((entry) => isPool(entry) ? entry.pool : [entry]);
}

/**
 * Each member of the config (an upstream with one model some route sends it: a plain candidate
 * or a pool member) once, in config order; what cooldown is kept for besides each upstream
 * (docs/design.md "Cooldown").
 */
export function configMembers(
  config: { routes: readonly Pick<Route, "candidates">[] },
): { upstream: string; model: string }[] {
  const seen = new Set<string>();
  const members: { upstream: string; model: string }[] = [];
  for (const route of config.routes) {
    for (const { upstream, model } of routeMembers(route)) {
      const key = JSON.stringify([upstream, model]);
      if (seen.has(key)) continue;
      seen.add(key);
      members.push({ upstream, model });
    }
  }
  return members;
}
