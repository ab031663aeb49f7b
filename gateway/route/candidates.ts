import { unsupportedBuiltins } from "../formats/builtin_tools.ts";
import type { Candidate, RouteDeps, RoutedRequest } from "./route_request.ts";
import { passesBodyThrough } from "./passthrough.ts";
import type { Route, RouteCandidate } from "../config/schema.ts";
import { isPool } from "../config/route_entries.ts";
import type { UpstreamKind } from "../formats/format.ts";
import { planOf, upstreamsById } from "./request_plan.ts";
import { embedUnsupported } from "../formats/embed_formats.ts";
import type { Cooldowns } from "./cooldown.ts";
import {
  type Member,
  memberBlocked,
  memberPausedUntil,
  recovering,
  recoveringLevels,
} from "./cooldown_levels.ts";

/**
 * What an upstream of `kind` could not be sent of this request, or nothing.
 * A same-format upstream gets the client's body itself, so it takes it all;
 * any other gets a translation, which carries neither the features the IR
 * has no slot for (`nativeOnly`) nor what the kind has no field for, nor
 * provider-run tools the kind has no equivalent for, unless the route drops
 * those (`drop_unsupported_tools`). An embeddings request asks the kind's embeddings API and,
 * given the candidate (`target`), what its upstream and model take (formats/embed_formats.ts).
 */
export function inexpressible(
  req: Pick<RoutedRequest, "codec" | "ir" | "resumeAt" | "embed"> & {
    route?: Pick<Route, "drop_unsupported_tools">;
  },
  opts: {
    kind: UpstreamKind;
    deps: Pick<RouteDeps, "adapters">;
    target?: Pick<Candidate, "upstream" | "candidate">;
  },
): string[] {
  if (req.embed) {
    const { target } = opts;
    return embedUnsupported(req.embed, {
      kind: opts.kind,
      target: target && { upstream: target.upstream, model: target.candidate.model },
    });
  }
  if (passesBodyThrough(req, opts.kind)) return [];
  const native = (req.ir.nativeOnly ?? []).map((f) => `${f.what} (${f.param})`);
  const tools = req.route?.drop_unsupported_tools ? [] : unsupportedBuiltins(req.ir, opts.kind);
  return [...native, ...tools, ...opts.deps.adapters[opts.kind].unsupportedFor(req.ir)];
}

/**
 * The candidates passed over because they could not be sent the request, for
 * the client's error beside the ones tried: `skipped` maps an upstream id to
 * what stood in the way (`inexpressible`), in plan order. Answers e.g.
 * "skipped: chat-up: built-in tool web_search", or "" when none was skipped.
 */
export function describeSkipped(skipped: ReadonlyMap<string, readonly string[]>): string {
  if (skipped.size === 0) return ""; // the usual case, asked once per request
  const parts = [...skipped].map(([upstream, missing]) => `${upstream}: ${missing.join(", ")}`);
  return parts.length ? `skipped: ${parts.join("; ")}` : "";
}

/**
 * Orders a route's candidates for one request (docs/design.md "Failover before content",
 * "Pools"): each pool entry becomes its members in its pick's order; enabled ones only, and of
 * those only the ones `accept` keeps (those that can be sent the request at all), before any
 * health rule; the session's upstream first while it is healthy; candidates in cooldown (their
 * member's or their upstream's) skipped, unless all are paused (then the one freed soonest goes
 * first); one whose pause ended is tried only by the request that claims its probe, while
 * another is healthy; a single candidate ignores cooldown.
 */
export function planCandidates(
  route: Route,
  opts: {
    deps: RouteDeps;
    sessionId: string | null;
    accept?: (c: Candidate) => boolean;
    /** Only these of the route's candidates (a narrowed pass: RoutedRequest.only). */
    only?: (candidate: RouteCandidate) => boolean;
  },
): Candidate[] {
  const { deps } = opts;
  const all: Candidate[] = [];
  const add = (target: Candidate) => {
    if (!target.candidate.enabled || !target.upstream.enabled) return;
    if (opts.only && !opts.only(target.candidate)) return;
    if (opts.accept?.(target) ?? true) all.push(target);
  };
  // A route without a pool has the same candidates for every request: made once per config.
  const { fixed } = planOf(deps.config, route);
  if (fixed) {
    // Indexed, not for-of: until the function is optimized a for-of makes an object per step.
    for (let i = 0; i < fixed.length; i++) add(fixed[i]!);
  } else {
    const byId = upstreamsById(deps.config);
    route.candidates.forEach((entry, index) => {
      if (!isPool(entry)) {
        const upstream = byId.get(entry.upstream);
        if (upstream) add({ upstream, candidate: entry });
        return;
      }
      const { config, slots } = deps;
      for (const member of deps.pools.order(route, { index, entry, config, slots })) add(member);
    });
  }
  if (all.length <= 1) return all;
  const { cooldowns } = deps;
  const affine = deps.affinity.get(route.model, opts.sessionId);
  // Cooldown is kept for each member (upstream and model) and for each upstream as a whole
  // (docs/design.md "Cooldown", route/cooldown_levels.ts): a candidate paused at either is skipped.
  const healthy = all.filter((c) => !memberBlocked(cooldowns, memberOf(c)));
  if (!healthy.length) {
    const until = (c: Candidate) => memberPausedUntil(cooldowns, memberOf(c));
    return [...all].sort((a, b) => until(a) - until(b));
  }
  const ordered = preferLeastLoaded(gateProbes(healthy, cooldowns), deps);
  const first = ordered.findIndex((c) => c.upstream.id === affine);
  if (first > 0) ordered.unshift(...ordered.splice(first, 1));
  return ordered;
}

/** The member a candidate is to cooldown: its upstream and the model it is sent. */
export function memberOf(c: Pick<Candidate, "upstream" | "candidate">): Member {
  return { upstream: c.upstream.id, model: c.candidate.model };
}

/**
 * A recovering candidate (a level's pause ended) gets one probe while another can take the rest;
 * with none, it is the best left and is tried as before. While its upstream recovers too, a
 * member with faults of its own leaves the upstream's probe to a member of it without any, if the
 * route has one: an upstream back from an outage is not judged by a model that failed alone.
 */
function gateProbes(healthy: Candidate[], cooldowns: Cooldowns): Candidate[] {
  // The usual request: nothing recovers, and nothing is built to say so.
  if (!healthy.some((c) => recovering(cooldowns, memberOf(c)))) return healthy;
  const levels = healthy.map((c) => recoveringLevels(cooldowns, memberOf(c)));
  if (levels.every((l) => l.length > 0)) return healthy;
  const cleanProbe = new Set(
    healthy.filter((_, i) => levels[i]!.join() === "upstream").map((c) => c.upstream.id),
  );
  const gated: Candidate[] = [];
  healthy.forEach((c, i) => {
    const recovering = levels[i]!;
    if (recovering.length === 0) return gated.push(c);
    if (recovering.length === 2 && cleanProbe.has(c.upstream.id)) return;
    // A copy: a route's candidates are shared by every request (request_plan.ts).
    gated.push({ ...c, probe: true });
  });
  return gated;
}

/**
 * "Equal" candidates are neighbours with the same model name on different
 * upstreams; among those the one with fewer live requests goes first.
 * Order between different models is the operator's and is kept, and so is a
 * pool's: its pick made it (docs/design.md "Pools").
 */
function preferLeastLoaded(list: Candidate[], deps: RouteDeps): Candidate[] {
  const out = [...list];
  for (let i = 1; i < out.length; i++) {
    for (let j = i; j > 0; j--) {
      const a = out[j - 1]!;
      const b = out[j]!;
      if (a.candidate.model !== b.candidate.model || a.pool || b.pool) break;
      if (deps.slots.inFlight(b.upstream.id) >= deps.slots.inFlight(a.upstream.id)) break;
      out[j - 1] = b;
      out[j] = a;
    }
  }
  return out;
}
