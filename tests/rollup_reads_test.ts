import assert from "node:assert/strict";
import { trendsApi } from "../admin/trends_api.ts";
import type { TrendBucket, TrendsView } from "../admin/trends_types.ts";
import { parseCostQuery } from "../admin/costs_api.ts";
import type { Db } from "../db/client.ts";
import { COST_GROUPS, type CostGroup, costTotals, MAX_COST_GROUPS } from "../db/cost_queries.ts";
import { MAX_SKETCH_ERROR } from "../db/first_content_sketch.ts";
import { num, numOrNull, textOrNull } from "../db/row_values.ts";
import { withTempDb } from "./db_helpers.ts";
import { NOW, writeVariedHistory } from "./rollup_history.ts";

/**
 * docs/scaling.md "Rollups": trends and cost totals read from the rollups answer what the
 * row queries they replaced answered on the same history. Those queries are kept here, as they
 * were, as the oracle.
 */

const ORACLE_TRENDS = (where: string) =>
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

const ORACLE_HOPS = (where: string) =>
  `SELECT (r.started_at - CAST(? AS INTEGER)) / CAST(? AS INTEGER) AS b,
  SUM(a.outcome = 'idle_timeout') AS idle_timeouts,
  SUM(a.outcome IN ('error', 'idle_timeout') AND EXISTS (
    SELECT 1 FROM attempts n
    WHERE n.request_id = a.request_id AND n.hop = a.hop + 1 AND n.upstream <> a.upstream
  )) AS failovers
FROM requests r JOIN attempts a ON a.request_id = r.id
WHERE ${where} GROUP BY b`;

async function oracleTrends(
  db: Db,
  q: { from: number; bucketMs: number; buckets: number; route?: string; upstream?: string },
): Promise<TrendBucket[]> {
  const to = q.from + q.bucketMs * q.buckets;
  const req = ["started_at >= ?", "started_at < ?"];
  const reqArgs: (string | number)[] = [q.from, q.bucketMs, q.from, to];
  const hop = ["r.started_at >= ?", "r.started_at < ?"];
  const hopArgs: (string | number)[] = [q.from, q.bucketMs, q.from, to];
  if (q.route !== undefined) {
    req.push("route = ?");
    reqArgs.push(q.route);
    hop.push("r.route = ?");
    hopArgs.push(q.route);
  }
  if (q.upstream !== undefined) {
    req.push("upstream = ?");
    reqArgs.push(q.upstream);
    hop.push("a.upstream = ?");
    hopArgs.push(q.upstream);
  }
  const requests = await db.client.execute({
    sql: ORACLE_TRENDS(req.join(" AND ")),
    args: reqArgs,
  });
  const hops = await db.client.execute({ sql: ORACLE_HOPS(hop.join(" AND ")), args: hopArgs });
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
    const b = buckets[num(row, "b")]!;
    b.success = num(row, "success");
    b.error = num(row, "error");
    b.aborted = num(row, "aborted");
    b.clientDisconnected = num(row, "client_disconnected");
    b.outputTokens = num(row, "output_tokens");
    b.firstContentP50Ms = numOrNull(row, "p50");
    b.firstContentP95Ms = numOrNull(row, "p95");
  }
  for (const row of hops.rows) {
    const b = buckets[num(row, "b")]!;
    b.idleTimeouts = num(row, "idle_timeouts");
    b.failovers = num(row, "failovers");
  }
  return buckets;
}

const UPSTREAMS = `ups(u) AS (
    SELECT MIN(upstream) FROM attempts
    UNION ALL SELECT (SELECT MIN(upstream) FROM attempts WHERE upstream > u) FROM ups
    WHERE u IS NOT NULL
  ), `;
const SOURCES: Record<CostGroup, { column: string; from: string; requests: string; ups?: string }> =
  {
    route: { column: "route", from: "requests", requests: "COUNT(*)" },
    key: { column: "key_id", from: "requests", requests: "COUNT(*)" },
    upstream: {
      column: "upstream",
      from: "ups JOIN attempts ON attempts.upstream = ups.u",
      requests: "COUNT(DISTINCT request_id)",
      ups: UPSTREAMS,
    },
  };

function oracleTotalsSql(by: CostGroup): string {
  const { column, from, requests, ups } = SOURCES[by];
  return `WITH RECURSIVE ${ups ?? ""}g AS (
    SELECT substr(${column}, 1, 300) AS grp, ${requests} AS requests,
      SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
      SUM(cost_usd) AS cost_usd
    FROM ${from} WHERE started_at >= ? AND started_at < ?
    GROUP BY substr(${column}, 1, 300)
  ), ranked AS (
    SELECT *, ROW_NUMBER() OVER (ORDER BY cost_usd DESC, requests DESC, grp) AS n FROM g
  )
  SELECT CASE WHEN n <= ${MAX_COST_GROUPS} THEN grp ELSE COUNT(*) END AS grp,
    n > ${MAX_COST_GROUPS} AS rest, SUM(requests) AS requests,
    SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
    SUM(cost_usd) AS cost_usd
  FROM ranked GROUP BY MIN(n, ${MAX_COST_GROUPS + 1}) ORDER BY MIN(n, ${MAX_COST_GROUPS + 1})`;
}

// The one documented difference (docs/scaling.md "Rollups"): by upstream, the rollups count a
// request at its first hop there, so one whose hops on an upstream straddle the window's start
// is not in the window.
const STRADDLING = `SELECT COUNT(DISTINCT a.request_id) AS n FROM attempts a
  WHERE a.upstream = ? AND a.started_at >= ? AND a.started_at < ? AND EXISTS (
    SELECT 1 FROM attempts e WHERE e.request_id = a.request_id AND e.upstream = a.upstream
      AND e.hop < a.hop AND e.started_at < ?)`;

async function oracleTotals(db: Db, opts: { by: CostGroup; since: number; until: number }) {
  const result = await db.client.execute({
    sql: oracleTotalsSql(opts.by),
    args: [opts.since, opts.until],
  });
  const straddling = async (group: string | null) =>
    opts.by === "upstream"
      ? num(
        (await db.client.execute({
          sql: STRADDLING,
          args: [group, opts.since, opts.until, opts.since],
        })).rows[0]!,
        "n",
      )
      : 0;
  const totals = result.rows.map((row) => ({
    group: num(row, "rest") ? `${num(row, "grp")} more` : textOrNull(row, "grp"),
    requests: num(row, "requests"),
    inputTokens: num(row, "input_tokens"),
    outputTokens: num(row, "output_tokens"),
    costUsd: numOrNull(row, "cost_usd"),
  }));
  for (const total of totals) total.requests -= await straddling(total.group);
  return totals;
}

const rounded = <T extends { costUsd: number | null }>(rows: T[]) =>
  rows.map((r) => ({ ...r, costUsd: r.costUsd === null ? null : Math.round(r.costUsd * 1e9) }));

/** Equal, percentiles within the sketch's bound of the exact ones. */
function assertSameBuckets(actual: TrendBucket[], expected: TrendBucket[], where: string): void {
  assert.equal(actual.length, expected.length, where);
  actual.forEach((a, i) => {
    const e = expected[i]!;
    for (const p of ["firstContentP50Ms", "firstContentP95Ms"] as const) {
      const [got, exact] = [a[p], e[p]];
      if (got === null || exact === null) assert.equal(got, exact, `${where} ${i} ${p}`);
      else assert.ok(Math.abs(got - exact) <= exact * MAX_SKETCH_ERROR, `${where} ${i} ${p}`);
    }
    const plain = (b: TrendBucket) => ({ ...b, firstContentP50Ms: 0, firstContentP95Ms: 0 });
    assert.deepEqual(plain(a), plain(e), `${where} bucket ${i}`);
  });
}

Deno.test("trends of 1 h and 24 h from the rollups answer what the row queries did", async () => {
  await withTempDb(async ({ db }) => {
    await writeVariedHistory(db);
    const app = trendsApi({ db, now: () => NOW, config: () => null });
    let compared = 0;
    for (const window of ["1h", "24h"]) {
      for (const filter of ["", "&route=smart", "&route=fast", "&upstream=u1", "&upstream=u3"]) {
        const res = await app.request(`/admin/api/trends?window=${window}${filter}`);
        assert.equal(res.status, 200);
        const view: TrendsView = await res.json();
        const params = new URLSearchParams(filter);
        const expected = await oracleTrends(db, {
          from: view.from,
          bucketMs: view.bucketMs,
          buckets: view.buckets.length,
          route: params.get("route") ?? undefined,
          upstream: params.get("upstream") ?? undefined,
        });
        assertSameBuckets(view.buckets, expected, `${window}${filter}`);
        compared += expected.filter((b) => b.success + b.error + b.failovers > 0).length;
      }
    }
    assert.ok(compared > 100, `${compared} buckets with history`);
  });
});

Deno.test("cost totals from the rollups answer what the row queries did, any window", async () => {
  await withTempDb(async ({ db }) => {
    await writeVariedHistory(db);
    const day = 86_400_000;
    const byDefault = parseCostQuery(new URLSearchParams(), NOW);
    assert.ok(byDefault.ok);
    const windows = [
      [byDefault.report.since, byDefault.report.until],
      [NOW - 30 * day, NOW + 1],
      // Whole days, quarter hours and minutes, and part minutes at both ends.
      [NOW - 2 * day + 12_345, NOW - 3 * 3_600_000 - 789],
      [Math.floor(NOW / day) * day - day, Math.floor(NOW / day) * day],
      [NOW - 7_200_000 + 1, NOW - 7_170_000],
      [NOW - 45 * 60_000 - 30_001, NOW - 20 * 60_000 + 59_999],
      [NOW - 60 * day, NOW - 40 * day],
    ] as const;
    let groups = 0;
    for (const [since, until] of windows) {
      for (const by of COST_GROUPS) {
        const got = await costTotals(db, { by, since, until });
        const expected = await oracleTotals(db, { by, since, until });
        assert.deepEqual(rounded(got), rounded(expected), `${by} ${since}..${until}`);
        groups += expected.length;
      }
    }
    assert.ok(groups > 50, `${groups} groups compared`);
  });
});
