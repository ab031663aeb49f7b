import { readerOf, type Reads } from "./read_db.ts";
import { num, numOrNull, textOrNull } from "./row_values.ts";

/** How the admin cost totals are grouped (docs/admin.md "Cost"). */
export const COST_GROUPS = ["route", "key", "upstream"] as const;
export type CostGroup = typeof COST_GROUPS[number];

export interface CostTotal {
  /** The route, key or upstream; null for requests without one (refused, open proxy). */
  group: string | null;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  /** null when no row in the group had a price. */
  costUsd: number | null;
}

/**
 * The most groups one answer lists; the rest are summed into one last row. A route is the
 * model a caller asked for, so unknown names (each refused with a 404) are groups too, as many
 * as callers care to invent (docs/security.md "Names are bounded").
 */
export const MAX_COST_GROUPS = 100;
/** The longest group name read back; names are bounded when stored, older rows may not be. */
export const MAX_GROUP_CHARS = 300;

// Every upstream named in `attempts`, one index seek each (a loose scan of
// attempts_upstream_started), so the window is read upstream by upstream along that index.
const UPSTREAMS = `ups(u) AS (
    SELECT MIN(upstream) FROM attempts
    UNION ALL SELECT (SELECT MIN(upstream) FROM attempts WHERE upstream > u) FROM ups
    WHERE u IS NOT NULL
  ), `;

// Requests by route or key, a range of requests_started; attempts by upstream, where a
// failed-over request counts once per upstream it reached, a range of
// attempts_upstream_started per upstream (which has no index of its own on started_at).
const SOURCES: Record<
  CostGroup,
  { column: string; from: string; requests: string; upstreams?: string }
> = {
  route: { column: "route", from: "requests", requests: "COUNT(*)" },
  key: { column: "key_id", from: "requests", requests: "COUNT(*)" },
  upstream: {
    column: "upstream",
    from: "ups JOIN attempts ON attempts.upstream = ups.u",
    requests: "COUNT(DISTINCT request_id)",
    upstreams: UPSTREAMS,
  },
};

/**
 * Groups ranked costliest first (then by requests); those past MAX_COST_GROUPS are summed into
 * one row (`rest` = 1, `grp` = how many groups it holds). Exported so tests can check each
 * grouping reads a range of an index (tests/db_history_indexes_test.ts).
 */
export function totalsSql(by: CostGroup): string {
  const { column, from, requests, upstreams } = SOURCES[by];
  return `WITH RECURSIVE ${upstreams ?? ""}g AS (
    SELECT substr(${column}, 1, ${MAX_GROUP_CHARS}) AS grp, ${requests} AS requests,
      SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
      SUM(cost_usd) AS cost_usd
    FROM ${from} WHERE started_at >= ? AND started_at < ?
    GROUP BY substr(${column}, 1, ${MAX_GROUP_CHARS})
  ), ranked AS (
    SELECT *, ROW_NUMBER() OVER (ORDER BY cost_usd DESC, requests DESC, grp) AS n FROM g
  )
  SELECT CASE WHEN n <= ${MAX_COST_GROUPS} THEN grp ELSE COUNT(*) END AS grp,
    n > ${MAX_COST_GROUPS} AS rest, SUM(requests) AS requests,
    SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
    SUM(cost_usd) AS cost_usd
  FROM ranked GROUP BY MIN(n, ${MAX_COST_GROUPS + 1}) ORDER BY MIN(n, ${MAX_COST_GROUPS + 1})`;
}

/**
 * Totals per group of rows started in [since, until), costliest first: at most
 * MAX_COST_GROUPS groups, then one row `N more` summing the rest.
 */
export async function costTotals(
  db: Reads,
  opts: { by: CostGroup; since: number; until: number },
): Promise<CostTotal[]> {
  const result = await readerOf(db).execute({
    sql: totalsSql(opts.by),
    args: [opts.since, opts.until],
  });
  return result.rows.map((row) => ({
    group: num(row, "rest") ? `${num(row, "grp")} more` : textOrNull(row, "grp"),
    requests: num(row, "requests"),
    inputTokens: num(row, "input_tokens"),
    outputTokens: num(row, "output_tokens"),
    costUsd: numOrNull(row, "cost_usd"),
  }));
}
