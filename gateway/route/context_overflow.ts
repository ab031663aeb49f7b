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
  readonly #on: boolean;
  /** The window of the last candidate that refused; null before any refusal. */
  #window: number | null = null;
  readonly #refused = new Set<string>();

  constructor(route: Pick<Route, "on_context_overflow">) {
    this.#on = route.on_context_overflow === "next";
  }

  /**
   * Whether a candidate's error is a context-length refusal to move on from.
   * Records the refusal: a refusing candidate with no `context_window` counts
   * as the smallest, so any candidate with a known window may follow it.
   */
  movesOn(error: GatewayError, target: Target): boolean {
    if (!this.#on || !isContextOverflow(error)) return false;
    this.#window = target.candidate.context_window ?? 0;
    this.#refused.add(requestKey(target));
    return true;
  }

  /** Whether a candidate is passed over after a refusal. */
  skips(target: Target): boolean {
    if (this.#window === null) return false;
    if (this.#refused.has(requestKey(target))) return true;
    const window = target.candidate.context_window;
    return window === undefined || window <= this.#window;
  }
}

/** One upstream sent one model: the same request, whichever place in the chain names it. */
function requestKey(target: Target): string {
  return JSON.stringify([target.upstream.id, target.candidate.model]);
}
