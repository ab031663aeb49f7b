/** Percentiles and summaries of raw samples; nearest-rank, so every figure is a measured sample. */

export interface Summary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(q * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    count: sorted.length,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? NaN,
    mean: sorted.length ? sum / sorted.length : NaN,
  };
}

/** Rounds for JSON and tables: three decimals is a microsecond when the unit is ms. */
export function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  // `+ 0` turns -0 into 0: results.json cannot keep -0, so a doc made from it printed "0"
  // where the run's own doc printed "-0" (tests/bench_quick_test.ts compares the two).
  return Math.round(value * f) / f + 0;
}

export function roundSummary(s: Summary, digits = 3): Summary {
  return {
    count: s.count,
    p50: round(s.p50, digits),
    p90: round(s.p90, digits),
    p99: round(s.p99, digits),
    max: round(s.max, digits),
    mean: round(s.mean, digits),
  };
}
