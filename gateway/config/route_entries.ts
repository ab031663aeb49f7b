import type { PoolEntry, Route, RouteCandidate, RouteEntry } from "./schema.ts";

/** An entry of `routes[].candidates` that is a pool (docs/design.md "Pools"). */
export function isPool(entry: RouteEntry): entry is PoolEntry {
  return "pool" in entry;
}

/** Every candidate of a route, each pool's members in their place, in config order. */
export function routeMembers(route: Pick<Route, "candidates">): RouteCandidate[] {
  return route.candidates.flatMap((entry) => isPool(entry) ? entry.pool : [entry]);
}
