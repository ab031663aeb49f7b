import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Config, Route, RouteCandidate } from "../config/schema.ts";

/** What the first-content timer needs of a hop (see Hop in hop.ts). */
interface HopLike {
  req: { route: Pick<Route, "first_content_timeout_secs"> };
  opts: {
    target: {
      upstream: { id: string };
      candidate: Pick<RouteCandidate, "first_content_timeout_secs">;
    };
    deps: { clock: Clock; config: Pick<Config, "failover"> };
  };
  idle: { readonly touched: boolean };
  controller: AbortController;
}

/**
 * The first-content timeout of a hop (docs/liveness.md): its candidate's own
 * `first_content_timeout_secs`, else its route's; undefined when off.
 */
export function firstContentSecs(hop: Pick<HopLike, "req" | "opts">): number | undefined {
  return hop.opts.target.candidate.first_content_timeout_secs ??
    hop.req.route.first_content_timeout_secs;
}

/**
 * Stops a hop that has sent no content `first_content_timeout_secs` after it
 * was sent, with `gw.upstream.first_content_timeout` as the stop's reason
 * (handled as an idle timeout before content). Whether content came is the
 * idle timer's to know: only content touches it (docs/design.md, "Pulse"), in
 * streams and whole answers alike, so neither path needs a hook of its own.
 * An idle timeout shorter than this one fires first and keeps its own code.
 * Answers the cancel function.
 */
export function startFirstContentTimer(hop: HopLike): () => void {
  const secs = firstContentSecs(hop);
  if (secs === undefined) return () => {};
  const { clock, config } = hop.opts.deps;
  const upstream = hop.opts.target.upstream.id;
  return clock.after(secs * 1000, () => {
    if (hop.idle.touched) return;
    hop.controller.abort(
      new GatewayError(`upstream ${upstream} sent no first content within ${secs}s`, {
        code: "gw.upstream.first_content_timeout",
        status: config.failover.timeout_status,
      }),
    );
  });
}
