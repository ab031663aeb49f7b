import { GatewayError } from "../runtime/gateway_error.ts";
import type { Config, Route, RouteCandidate } from "../config/schema.ts";

/** What the first-content timeout needs of a hop (see Hop in hop.ts). */
interface HopLike {
  req: { route: Pick<Route, "first_content_timeout_secs"> };
  opts: {
    target: {
      upstream: { id: string };
      candidate: Pick<RouteCandidate, "first_content_timeout_secs">;
    };
    deps: { config: Pick<Config, "failover"> };
  };
}

/**
 * The first-content timeout of a hop (docs/liveness.md): its candidate's own
 * `first_content_timeout_secs`, else its route's; undefined when off.
 */
export function firstContentSecs(hop: HopLike): number | undefined {
  return hop.opts.target.candidate.first_content_timeout_secs ??
    hop.req.route.first_content_timeout_secs;
}

/**
 * The stop of a hop that has sent no content `first_content_timeout_secs` after it was sent:
 * `gw.upstream.first_content_timeout` (handled as an idle timeout before content). The hop's
 * idle timer keeps this deadline too (idle_timer.ts): whether content came is the idle
 * timer's to know, since only content touches it (docs/design.md, "Pulse"), in streams and
 * whole answers alike, so neither path needs a hook of its own. An idle timeout shorter than
 * this one fires first and keeps its own code.
 */
export function firstContentTimeout(hop: HopLike, secs: number): GatewayError {
  const upstream = hop.opts.target.upstream.id;
  return new GatewayError(`upstream ${upstream} sent no first content within ${secs}s`, {
    code: "gw.upstream.first_content_timeout",
    status: hop.opts.deps.config.failover.timeout_status,
  });
}
