import { unsupportedBuiltins } from "../formats/builtin_tools.ts";
import type { Candidate, RouteDeps, RoutedRequest } from "./route_request.ts";
import { passesBodyThrough } from "./passthrough.ts";
import type { Config, Route, Upstream } from "../config/schema.ts";
import type { UpstreamKind } from "../formats/format.ts";
import { onePer } from "../runtime/memo.ts";

/**
 * What an upstream of `kind` could not be sent of this request, or nothing.
 * A same-format upstream gets the client's body itself, so it takes it all;
 * any other gets a translation, which carries neither the features the IR
 * has no slot for (`nativeOnly`) nor what the kind has no field for, nor
 * provider-run tools the kind has no equivalent for, unless the route drops
 * those (`drop_unsupported_tools`).
 */
export function inexpressible(
  req: Pick<RoutedRequest, "codec" | "ir" | "resumeAt"> & {
    route?: Pick<Route, "drop_unsupported_tools">;
  },
  opts: { kind: UpstreamKind; deps: Pick<RouteDeps, "adapters"> },
): string[] {
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
 * Orders a route's candidates for one request (docs/design.md "Failover before content"): enabled ones only,
 * and of those only the ones `accept` keeps (those that can be sent the
 * request at all), before any health rule; the session's upstream first while
 * it is healthy; upstreams in cooldown skipped, unless all are paused (then
 * the one freed soonest goes first); a single candidate ignores cooldown.
 */
export function planCandidates(
  route: Route,
  opts: { deps: RouteDeps; sessionId: string | null; accept?: (c: Candidate) => boolean },
): Candidate[] {
  const { deps } = opts;
  const byId = upstreamsById(deps.config);
  const all: Candidate[] = [];
  for (const candidate of route.candidates) {
    const upstream = byId.get(candidate.upstream);
    if (!candidate.enabled || !upstream?.enabled) continue;
    const target = { upstream, candidate };
    if (opts.accept?.(target) ?? true) all.push(target);
  }
  if (all.length <= 1) return all;
  const affine = deps.affinity.get(route.model, opts.sessionId);
  const healthy = all.filter((c) => !deps.cooldowns.isPaused(c.upstream.id));
  if (!healthy.length) {
    const until = (c: Candidate) => deps.cooldowns.get(c.upstream.id).pausedUntil ?? 0;
    return [...all].sort((a, b) => until(a) - until(b));
  }
  const ordered = preferLeastLoaded(healthy, deps);
  const first = ordered.findIndex((c) => c.upstream.id === affine);
  if (first > 0) ordered.unshift(...ordered.splice(first, 1));
  return ordered;
}

/** A config's upstreams by id, made once per config. */
const upstreamsById = onePer((config: Config) =>
  new Map<string, Upstream>(config.upstreams.map((u) => [u.id, u]))
);

/**
 * "Equal" candidates are neighbours with the same model name on different
 * upstreams; among those the one with fewer live requests goes first.
 * Order between different models is the operator's and is kept.
 */
function preferLeastLoaded(list: Candidate[], deps: RouteDeps): Candidate[] {
  const out = [...list];
  for (let i = 1; i < out.length; i++) {
    for (let j = i; j > 0; j--) {
      const a = out[j - 1]!;
      const b = out[j]!;
      if (a.candidate.model !== b.candidate.model) break;
      if (deps.slots.inFlight(b.upstream.id) >= deps.slots.inFlight(a.upstream.id)) break;
      out[j - 1] = b;
      out[j] = a;
    }
  }
  return out;
}
