import type { Clock } from "../runtime/clock.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { stopReason } from "./stop_reasons.ts";

/**
 * Times a stopped hop from its stop (the AbortSignal firing with one of our stop reasons) to its
 * upstream connection's close: the fetch failing while headers were awaited, or the body's
 * cancel completing. `pulsegate_upstream_cancel_seconds` (docs/observability.md) shows that
 * every stop lets go of the upstream at once. A hop that finished first (no stop reason) and a
 * stop with no connection open (between retries) are not timed.
 */
export class CancelTimer {
  readonly #signal: AbortSignal;
  #stoppedAt: number | null = null;
  #reason = "";
  #timed = false;

  constructor(
    signal: AbortSignal,
    private opts: { clock: Clock; metrics: Metrics; upstream: string },
  ) {
    this.#signal = signal;
    // Registered before any reader's abort listener, so the stop is stamped before the cancel.
    // The timer is its own listener (`handleEvent`): no closure per hop.
    signal.addEventListener("abort", this, { once: true });
  }

  /** The stop: stamped when it is one of ours. */
  handleEvent(): void {
    const reason = stopReason(this.#signal);
    if (!reason) return;
    this.#stoppedAt = this.opts.clock.now();
    this.#reason = reason.code;
  }

  /** The connection is closed; observed once, and only after a stop. */
  closed(): void {
    if (this.#stoppedAt === null || this.#timed) return;
    this.#timed = true;
    const { clock, metrics, upstream } = this.opts;
    const ms = clock.elapsed(this.#stoppedAt);
    metrics.upstreamCancel.observe({ upstream, reason: this.#reason }, Math.max(0, ms) / 1000);
  }
}
