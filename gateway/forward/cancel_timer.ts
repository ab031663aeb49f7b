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
  #stoppedAt: number | null = null;
  #reason = "";
  #timed = false;

  constructor(
    signal: AbortSignal,
    private opts: { clock: Clock; metrics: Metrics; upstream: string },
  ) {
    // Registered before any reader's abort listener, so the stop is stamped before the cancel.
    signal.addEventListener("abort", () => {
      const reason = stopReason(signal);
      if (!reason) return;
      this.#stoppedAt = opts.clock.now();
      this.#reason = reason.code;
    }, { once: true });
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
