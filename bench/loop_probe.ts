/** Summary of event-loop lateness over a window. */
export interface LoopProbeSummary {
  intervalMs: number;
  ticks: number;
  /** The longest a tick came late: the longest time the loop ran something else. */
  maxStallMs: number;
  p99StallMs: number;
  over10ms: number;
  over50ms: number;
}

/**
 * Measures event-loop stalls from inside a process: a timer asks to run every `intervalMs`;
 * how late each tick comes is how long the loop was busy with something else.
 */
export class LoopProbe {
  #last = performance.now();
  #late: number[] = [];
  #timer: ReturnType<typeof setInterval> | null = null;

  /** Starts at once unless `running` is false: an idle probe should not cost its host CPU. */
  constructor(readonly intervalMs: number, opts: { running?: boolean } = {}) {
    if (opts.running !== false) this.start();
  }

  start(): void {
    this.reset();
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#late.push(Math.max(0, now - this.#last - this.intervalMs));
      this.#last = now;
    }, this.intervalMs);
  }

  reset(): void {
    this.#late = [];
    this.#last = performance.now();
  }

  summary(): LoopProbeSummary {
    const sorted = [...this.#late].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    return {
      intervalMs: this.intervalMs,
      ticks: sorted.length,
      maxStallMs: sorted.at(-1) ?? 0,
      p99StallMs: at(0.99) ?? 0,
      over10ms: sorted.filter((ms) => ms > 10).length,
      over50ms: sorted.filter((ms) => ms > 50).length,
    };
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}
