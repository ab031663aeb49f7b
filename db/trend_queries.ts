import type { InStatement, InValue } from "@libsql/client";
import { sketchValue } from "./first_content_sketch.ts";
import { readerOf, type ReadRow, type Reads } from "./read_db.ts";
import { ROLLUP_BUCKETS_MS } from "./rollups.ts";
import { num, numOrNull } from "./row_values.ts";

/**
 * History bucketed by start time for the admin page's trends (docs/admin.md "Trends"). Buckets of
 * whole minutes are summed from the rollups (db/rollups.ts), of the largest size that divides
 * them (a 15-minute bucket reads one quarter-hour row per group), so the cost is the window's
 * rollup buckets, not its requests; percentiles come from the merged sketches, within
 * MAX_SKETCH_ERROR. Shorter buckets (the 15-minute window's 30 s) cannot be cut from minutes:
 * they are read from the rows along the `started_at` indexes (or `route`/`upstream` +
 * `started_at` when filtered), a window of minutes' rows, exact.
 */
export interface TrendQuery {
  /** Start of the first bucket, epoch ms. */
  from: number;
  bucketMs: number;
  buckets: number;
  route?: string;
  /** Requests whose last upstream it was; hops (idle timeouts, failovers) on it. */
  upstream?: string;
}

export interface TrendBucket {
  /** Start of the bucket, epoch ms. */
  at: number;
  success: number;
  /** Errors other than aborts and client disconnects. */
  error: number;
  aborted: number;
  clientDisconnected: number;
  /** Time to first content of the requests that had some (nearest rank). */
  firstContentP50Ms: number | null;
  firstContentP95Ms: number | null;
  /** Hops that ended in an idle timeout (or a first-content timeout). */
  idleTimeouts: number;
  /** Hops that failed and were followed by a hop on another upstream. */
  failovers: number;
  outputTokens: number;
}

// Nearest-rank percentiles with window functions: rank k of n is the p-th when k = ceil(n*p/100).
const REQUESTS_SQL = (where: string) =>
  `WITH r AS (
  SELECT (started_at - CAST(? AS INTEGER)) / CAST(? AS INTEGER) AS b,
    outcome, error_code, first_content_ms, output_tokens
  FROM requests WHERE ${where}
), ranked AS (
  SELECT b, first_content_ms AS ms,
    ROW_NUMBER() OVER (PARTITION BY b ORDER BY first_content_ms) AS k,
    COUNT(*) OVER (PARTITION BY b) AS n
  FROM r WHERE first_content_ms IS NOT NULL
), pct AS (
  SELECT b,
    MAX(CASE WHEN k = (n * 50 + 99) / 100 THEN ms END) AS p50,
    MAX(CASE WHEN k = (n * 95 + 99) / 100 THEN ms END) AS p95
  FROM ranked GROUP BY b
)
SELECT r.b AS b,
  SUM(outcome = 'success') AS success,
  SUM(outcome = 'error' AND COALESCE(error_code, '')
    NOT IN ('gw.request.aborted', 'gw.client.disconnected')) AS error,
  SUM(COALESCE(error_code = 'gw.request.aborted', 0)) AS aborted,
  SUM(COALESCE(error_code = 'gw.client.disconnected', 0)) AS client_disconnected,
  SUM(COALESCE(output_tokens, 0)) AS output_tokens,
  MAX(pct.p50) AS p50, MAX(pct.p95) AS p95
FROM r LEFT JOIN pct ON pct.b = r.b GROUP BY r.b`;

// Bound numbers arrive as REAL; the casts keep each bucket an integer division.
const HOPS_SQL = (where: string) =>
  `SELECT (r.started_at - CAST(? AS INTEGER)) / CAST(? AS INTEGER) AS b,
  SUM(a.outcome = 'idle_timeout') AS idle_timeouts,
  SUM(a.outcome IN ('error', 'idle_timeout') AND EXISTS (
    SELECT 1 FROM attempts n
    WHERE n.request_id = a.request_id AND n.hop = a.hop + 1 AND n.upstream <> a.upstream
  )) AS failovers
FROM requests r JOIN attempts a ON a.request_id = r.id
WHERE ${where} GROUP BY b`;

/** Exported so tests can check both stay index range scans. */
export function trendStatements(q: TrendQuery): { requests: InStatement; hops: InStatement } {
  const to = q.from + q.bucketMs * q.buckets;
  const head: InValue[] = [q.from, q.bucketMs];
  const requestTerms = ["started_at >= ?", "started_at < ?"];
  const requestArgs: InValue[] = [q.from, to];
  const hopTerms = ["r.started_at >= ?", "r.started_at < ?"];
  const hopArgs: InValue[] = [q.from, to];
  if (q.route !== undefined) {
    requestTerms.push("route = ?");
    requestArgs.push(q.route);
    hopTerms.push("r.route = ?");
    hopArgs.push(q.route);
  }
  if (q.upstream !== undefined) {
    requestTerms.push("upstream = ?");
    requestArgs.push(q.upstream);
    // A hop starts after its request: the lower bound lets attempts_upstream_started range.
    hopTerms.push("a.upstream = ?", "a.started_at >= ?");
    hopArgs.push(q.upstream, q.from);
  }
  return {
    requests: { sql: REQUESTS_SQL(requestTerms.join(" AND ")), args: [...head, ...requestArgs] },
    hops: { sql: HOPS_SQL(hopTerms.join(" AND ")), args: [...head, ...hopArgs] },
  };
}

/** The largest rollup bucket that tiles the window's buckets; null when none does. */
export function rollupSizeFor(q: TrendQuery): number | null {
  const fits = ROLLUP_BUCKETS_MS.filter((ms) => q.bucketMs % ms === 0 && q.from % ms === 0);
  return fits.at(-1) ?? null;
}

/** Every bucket of the window in order, empty ones as zeros. */
export async function trendBuckets(db: Reads, q: TrendQuery): Promise<TrendBucket[]> {
  const size = rollupSizeFor(q);
  return size === null ? await rowBuckets(db, q) : await rollupBuckets(db, { ...q, size });
}

function emptyBuckets(q: TrendQuery): TrendBucket[] {
  return Array.from({ length: q.buckets }, (_, i) => ({
    at: q.from + i * q.bucketMs,
    success: 0,
    error: 0,
    aborted: 0,
    clientDisconnected: 0,
    firstContentP50Ms: null,
    firstContentP95Ms: null,
    idleTimeouts: 0,
    failovers: 0,
    outputTokens: 0,
  }));
}

/** A bucket's request counts and tokens, as both the row and the rollup statements name them. */
function countsInto(bucket: TrendBucket, row: ReadRow): void {
  bucket.success = num(row, "success");
  bucket.error = num(row, "error");
  bucket.aborted = num(row, "aborted");
  bucket.clientDisconnected = num(row, "client_disconnected");
  bucket.outputTokens = num(row, "output_tokens");
}

async function rowBuckets(db: Reads, q: TrendQuery): Promise<TrendBucket[]> {
  const statements = trendStatements(q);
  const [requests, hops] = await Promise.all([
    readerOf(db).execute(statements.requests),
    readerOf(db).execute(statements.hops),
  ]);
  const buckets = emptyBuckets(q);
  for (const row of requests.rows) {
    const bucket = buckets[num(row, "b")];
    if (!bucket) continue;
    countsInto(bucket, row);
    bucket.firstContentP50Ms = numOrNull(row, "p50");
    bucket.firstContentP95Ms = numOrNull(row, "p95");
  }
  for (const row of hops.rows) {
    const bucket = buckets[num(row, "b")];
    if (!bucket) continue;
    bucket.idleTimeouts = num(row, "idle_timeouts");
    bucket.failovers = num(row, "failovers");
  }
  return buckets;
}

// Outcome classes as db/rollups.ts stores them; `open` (no outcome yet) is in no chart.
const ROLLUP_SQL = (where: string) =>
  `SELECT (bucket_start - CAST(? AS INTEGER)) / CAST(? AS INTEGER) AS b,
  SUM(CASE outcome WHEN 'success' THEN requests ELSE 0 END) AS success,
  SUM(CASE outcome WHEN 'error' THEN requests ELSE 0 END) AS error,
  SUM(CASE outcome WHEN 'aborted' THEN requests ELSE 0 END) AS aborted,
  SUM(CASE outcome WHEN 'client_disconnected' THEN requests ELSE 0 END) AS client_disconnected,
  SUM(output_tokens) AS output_tokens, SUM(idle_timeouts) AS idle_timeouts,
  SUM(failovers) AS failovers
FROM rollup_requests WHERE ${where} GROUP BY b`;

// The sketches merged and ranked in SQLite, on the reader's thread: parsing a day's sketches in
// JavaScript held the serving thread for 10 to 30 ms. Per bucket, the first bin whose running
// count reaches the nearest rank ceil(n * p / 100), as `sketchPercentile` reads it.
const PERCENTILE_SQL = (where: string) =>
  `WITH bins AS (
  SELECT (bucket_start - CAST(? AS INTEGER)) / CAST(? AS INTEGER) AS b,
    CAST(j.key AS INTEGER) AS bin, SUM(j.value) AS n
  FROM rollup_requests, json_each(rollup_requests.first_content) AS j
  WHERE ${where} GROUP BY b, bin
), running AS (
  SELECT b, bin, SUM(n) OVER (PARTITION BY b ORDER BY bin) AS seen,
    SUM(n) OVER (PARTITION BY b) AS total
  FROM bins WHERE n > 0
)
SELECT b, MIN(CASE WHEN seen >= (total * 50 + 99) / 100 THEN bin END) AS p50_bin,
  MIN(CASE WHEN seen >= (total * 95 + 99) / 100 THEN bin END) AS p95_bin
FROM running GROUP BY b`;

/**
 * The rollup statement of a window of buckets tiled by rollup buckets of `size`. With an
 * upstream, a rollup row's requests are those whose last upstream it was and its hops are that
 * upstream's own, as the row queries count them. Exported so tests can check it reads a range of
 * the rollups' key.
 */
export function rollupTrendStatement(q: TrendQuery & { size: number }): InStatement {
  const { where, args } = rollupWhere(q);
  return { sql: ROLLUP_SQL(where), args };
}

/** The percentiles of the same window: each bucket's p50 and p95 bins. */
export function rollupPercentileStatement(q: TrendQuery & { size: number }): InStatement {
  const { where, args } = rollupWhere(q);
  return { sql: PERCENTILE_SQL(where), args };
}

function rollupWhere(q: TrendQuery & { size: number }): { where: string; args: InValue[] } {
  const terms = ["bucket_ms = ?", "bucket_start >= ?", "bucket_start < ?"];
  const args: InValue[] = [q.from, q.bucketMs, q.size, q.from, q.from + q.bucketMs * q.buckets];
  if (q.route !== undefined) {
    terms.push("route = ?");
    args.push(q.route);
  }
  if (q.upstream !== undefined) {
    terms.push("upstream = ?");
    args.push(q.upstream);
  }
  return { where: terms.join(" AND "), args };
}

async function rollupBuckets(db: Reads, q: TrendQuery & { size: number }): Promise<TrendBucket[]> {
  const [counts, percentiles] = await Promise.all([
    readerOf(db).execute(rollupTrendStatement(q)),
    readerOf(db).execute(rollupPercentileStatement(q)),
  ]);
  const buckets = emptyBuckets(q);
  for (const row of counts.rows) {
    const bucket = buckets[num(row, "b")];
    if (!bucket) continue;
    countsInto(bucket, row);
    bucket.idleTimeouts = num(row, "idle_timeouts");
    bucket.failovers = num(row, "failovers");
  }
  for (const row of percentiles.rows) {
    const bucket = buckets[num(row, "b")];
    if (!bucket) continue;
    const p50 = numOrNull(row, "p50_bin");
    const p95 = numOrNull(row, "p95_bin");
    bucket.firstContentP50Ms = p50 === null ? null : sketchValue(p50);
    bucket.firstContentP95Ms = p95 === null ? null : sketchValue(p95);
  }
  return buckets;
}
