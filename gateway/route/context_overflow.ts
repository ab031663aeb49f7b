import type { Route, RouteCandidate, Upstream } from "../config/schema.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import { isContextOverflow } from "../formats/context_overflow.ts";

interface Target {
  upstream: Pick<Upstream, "id">;
  candidate: Pick<RouteCandidate, "model" | "context_window">;
}

/**
 * `on_context_overflow: "next"` for one request (docs/liveness.md), once the verdict table has
 * said a refusal moves on to a larger window (`onward: "larger_window"` in
 * gateway/forward/verdict.ts): only a candidate with a known, larger `context_window` is worth
 * sending it to; and the same request (upstream and model) is never sent twice. Before any such
 * refusal it passes every candidate.
 */
export class ContextOverflow {
  /** The window of the last candidate that refused; null before any refusal. */
  #window: number | null = null;
  readonly #refused = new Set<string>();

  /**
   * A candidate refused the prompt as too long, and the verdict moves on to a larger window: a
   * refusing candidate with no `context_window` counts as the smallest, so any candidate with a
   * known window may follow.
   */
  note(target: Target): void {
    this.#window = target.candidate.context_window ?? 0;
    this.#refused.add(requestKey(target));
  }

  /** Whether a candidate is passed over after a refusal. */
  skips(target: Target): boolean {
    if (this.#window === null) return false;
    if (this.#refused.has(requestKey(target))) return true;
    const window = target.candidate.context_window;
    return window === undefined || window <= this.#window;
  }
}

/** Whether `error` is a context-length refusal that `route` moves on to a larger window. */
export function movesOnOverflow(
  route: Pick<Route, "on_context_overflow">,
  error: GatewayError,
): boolean {
  return route.on_context_overflow === "next" && isContextOverflow(error);
}

/** One upstream sent one model: the same request, whichever place in the chain names it. */
function requestKey(target: Target): string {
  return JSON.stringify([target.upstream.id, target.candidate.model]);
}
