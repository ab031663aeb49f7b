import type { InStatement, InValue } from "@libsql/client";
import { readerOf, type Reads } from "./read_db.ts";
import { num, numOrNull } from "./row_values.ts";

/**
 * History bucketed by start time for the admin page's trends (docs/admin.md "Trends"). Requests
 * are read along the `started_at` indexes (or `route`/`upstream` + `started_at` when filtered),
 * so the cost is the rows in the window, not the table.
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

/** Every bucket of the window in order, empty ones as zeros. */
export async function trendBuckets(db: Reads, q: TrendQuery): Promise<TrendBucket[]> {
  const statements = trendStatements(q);
  const [requests, hops] = await Promise.all([
    readerOf(db).execute(statements.requests),
    readerOf(db).execute(statements.hops),
  ]);
  const buckets: TrendBucket[] = Array.from({ length: q.buckets }, (_, i) => ({
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
  for (const row of requests.rows) {
    const bucket = buckets[num(row, "b")];
    if (!bucket) continue;
    bucket.success = num(row, "success");
    bucket.error = num(row, "error");
    bucket.aborted = num(row, "aborted");
    bucket.clientDisconnected = num(row, "client_disconnected");
    bucket.outputTokens = num(row, "output_tokens");
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
