import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Route, RouteCandidate } from "../config/schema.ts";

/**
 * The first-content timeout (docs/liveness.md): a candidate's own
 * `first_content_timeout_secs`, else its route's; undefined when off.
 */
export function firstContentSecs(
  route: Pick<Route, "first_content_timeout_secs">,
  candidate: Pick<RouteCandidate, "first_content_timeout_secs">,
): number | undefined {
  return candidate.first_content_timeout_secs ?? route.first_content_timeout_secs;
}

export function firstContentTimeout(
  upstream: string,
  opts: { secs: number; timeoutStatus: number },
): GatewayError {
  return new GatewayError(`upstream ${upstream} sent no first content within ${opts.secs}s`, {
    code: "gw.upstream.first_content_timeout",
    source: "upstream",
    status: opts.timeoutStatus,
  });
}

/**
 * Stops a hop that has sent no content `secs` after it was sent. Whether
 * content came is the idle timer's to know: only content touches it (docs/design.md,
 * content versus keep-alive), in streams and whole answers alike, so this
 * timer needs no hook of its own in either path. An idle timeout shorter than
 * this one fires first and keeps its own code. Answers the cancel function.
 */
export function startFirstContentTimer(
  clock: Clock,
  opts: { secs: number | undefined; contentSeen: () => boolean; stop: () => void },
): () => void {
  if (opts.secs === undefined) return () => {};
  return clock.after(opts.secs * 1000, () => {
    if (!opts.contentSeen()) opts.stop();
  });
}
