import type { Route, RouteCandidate, Upstream } from "../config/schema.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import { isContextOverflow } from "../formats/context_overflow.ts";

interface Target {
  upstream: Pick<Upstream, "id">;
  candidate: Pick<RouteCandidate, "model" | "context_window">;
}

/**
 * `on_context_overflow: "next"` for one request (docs/liveness.md). After an
 * upstream refuses the prompt as longer than its context window, only a
 * candidate with a known, larger `context_window` is worth sending it to; and
 * the same request (upstream and model) is never sent twice. Without the
 * option, or before any refusal, it passes every candidate.
 */
export class ContextOverflow {
  /** The window of the last candidate that refused; null before any refusal. */
  #window: number | null = null;
  readonly #refused = new Set<string>();

  constructor(readonly route: Pick<Route, "on_context_overflow">) {}

  /**
   * Notes a candidate's failure: a context-length refusal the route moves on
   * from is remembered, and a refusing candidate with no `context_window`
   * counts as the smallest, so any candidate with a known window may follow.
   */
  note(error: GatewayError, target: Target): void {
    if (!movesOnOverflow(this.route, error)) return;
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
