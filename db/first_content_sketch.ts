/**
 * A mergeable sketch of times to first content (docs/admin.md "Trends"): counts per bin of a
 * fixed log scale, so the sketches of any minutes, routes, keys and upstreams add up bin by bin
 * and a percentile of the sum is read from the bin holding its rank.
 *
 * Bin 0 holds values below 1 ms; bin k >= 1 holds [g^(k-1), g^k) with g = SKETCH_GROWTH, and
 * reads back as the point of equal relative distance to both ends, rounded to a whole ms: within
 * (g - 1) / (g + 1) = 1.96 % of any value in the bin, plus the rounding. Over whole milliseconds
 * that is exact below 28 ms and within 3.6 % above (first_content_sketch_test.ts checks every
 * value to 2,000,000 ms). A nearest-rank percentile read from the merged bins is therefore within
 * MAX_SKETCH_ERROR of the exact one over the same requests.
 *
 * The bin expression is part of a shipped migration (db/rollups.ts): stored sketches were
 * binned with it, so changing the growth needs a new migration that rebuilds them.
 */

export const SKETCH_GROWTH = 1.04;
/** Relative error of a percentile read from a sketch, rounding included (tested). */
export const MAX_SKETCH_ERROR = 0.036;

const LN_GROWTH = Math.log(SKETCH_GROWTH);

/** Count per bin. */
export type Sketch = Map<number, number>;

/** The bin of a time to first content, as the SQL of `sketchBinSql` computes it. */
export function sketchBin(ms: number): number {
  return ms < 1 ? 0 : 1 + Math.floor(Math.log(ms) / LN_GROWTH);
}

/** What a bin reads back as, in whole ms. */
export function sketchValue(bin: number): number {
  if (bin <= 0) return 0;
  return Math.round(SKETCH_GROWTH ** (bin - 1) * 2 * SKETCH_GROWTH / (SKETCH_GROWTH + 1));
}

/**
 * SQL for the bin of the value `column` (NULL when it is NULL). `ln` is one of SQLite's math
 * functions, built into libSQL. The constant is written out so the text never changes.
 */
export function sketchBinSql(column: string): string {
  return `(CASE WHEN ${column} IS NULL THEN NULL WHEN ${column} < 1 THEN 0 ` +
    `ELSE 1 + CAST(ln(${column}) / 0.03922071315328133 AS INTEGER) END)`;
}

/** Adds `count` to `bin`, dropping a bin that reaches zero. */
export function addToSketch(sketch: Sketch, opts: { bin: number; count: number }): void {
  const total = (sketch.get(opts.bin) ?? 0) + opts.count;
  if (total === 0) sketch.delete(opts.bin);
  else sketch.set(opts.bin, total);
}

/**
 * The nearest-rank p-th percentile (rank ceil(n * p / 100) of n, as the row queries had it) of
 * the values the sketch counts; null when it counts none.
 */
export function sketchPercentile(sketch: Sketch, p: number): number | null {
  let n = 0;
  for (const count of sketch.values()) n += count;
  if (n <= 0) return null;
  const rank = Math.ceil((n * p) / 100);
  let seen = 0;
  for (const bin of [...sketch.keys()].sort((a, b) => a - b)) {
    seen += sketch.get(bin) ?? 0;
    if (seen >= rank) return sketchValue(bin);
  }
  return null;
}
