import type { Db } from "./client.ts";
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

// Requests by route or key; attempts by upstream, where a failed-over request counts once
// per upstream it reached. Both are index range scans on started_at.
const SOURCES: Record<CostGroup, { column: string; from: string; requests: string }> = {
  route: { column: "route", from: "requests", requests: "COUNT(*)" },
  key: { column: "key_id", from: "requests", requests: "COUNT(*)" },
  upstream: { column: "upstream", from: "attempts", requests: "COUNT(DISTINCT request_id)" },
};

/**
 * Groups ranked costliest first (then by requests); those past MAX_COST_GROUPS are summed into
 * one row (`rest` = 1, `grp` = how many groups it holds).
 */
function totalsSql(by: CostGroup): string {
  const { column, from, requests } = SOURCES[by];
  return `WITH g AS (
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
  db: Db,
  opts: { by: CostGroup; since: number; until: number },
): Promise<CostTotal[]> {
  const result = await db.client.execute({
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
