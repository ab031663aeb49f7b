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

// Requests by route or key; attempts by upstream, where a failed-over request counts once
// per upstream it reached. Both are index range scans on started_at.
const TOTALS: Record<CostGroup, string> = {
  route: `SELECT route AS grp, COUNT(*) AS requests, SUM(input_tokens) AS input_tokens,
    SUM(output_tokens) AS output_tokens, SUM(cost_usd) AS cost_usd FROM requests
    WHERE started_at >= ? AND started_at < ? GROUP BY route`,
  key: `SELECT key_id AS grp, COUNT(*) AS requests, SUM(input_tokens) AS input_tokens,
    SUM(output_tokens) AS output_tokens, SUM(cost_usd) AS cost_usd FROM requests
    WHERE started_at >= ? AND started_at < ? GROUP BY key_id`,
  upstream: `SELECT upstream AS grp, COUNT(DISTINCT request_id) AS requests,
    SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
    SUM(cost_usd) AS cost_usd FROM attempts
    WHERE started_at >= ? AND started_at < ? GROUP BY upstream`,
};

/** Totals per group of rows started in [since, until), costliest first. */
export async function costTotals(
  db: Db,
  opts: { by: CostGroup; since: number; until: number },
): Promise<CostTotal[]> {
  const result = await db.client.execute({
    sql: TOTALS[opts.by],
    args: [opts.since, opts.until],
  });
  return result.rows.map((row) => ({
    group: textOrNull(row, "grp"),
    requests: num(row, "requests"),
    inputTokens: num(row, "input_tokens"),
    outputTokens: num(row, "output_tokens"),
    costUsd: numOrNull(row, "cost_usd"),
  })).sort((a, b) => (b.costUsd ?? -1) - (a.costUsd ?? -1) || b.requests - a.requests);
}
