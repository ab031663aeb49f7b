import { readerOf, type Reads } from "./read_db.ts";
import { ROLLUP_BUCKETS_MS } from "./rollups.ts";
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
// attempts_upstream_started), so a range of hops is read upstream by upstream along that index.
const UPSTREAMS = `ups(u) AS (
    SELECT MIN(upstream) FROM attempts
    UNION ALL SELECT (SELECT MIN(upstream) FROM attempts WHERE upstream > u) FROM ups
    WHERE u IS NOT NULL
  ), `;

/** A name as the rollups store it: an empty blob stands for none (db/rollups.ts). */
const rollupName = (column: string) => `CASE WHEN typeof(${column}) = 'text' THEN ${column} END`;

interface Source {
  rollup: string;
  edge: string;
  upstreams?: string;
}

/** Route and key: a request's own column, from `rollup_requests` and the rows. */
function requestSource(column: "route" | "key_id"): Source {
  return {
    rollup: `SELECT ${rollupName(column)}, requests, requests, input_tokens, output_tokens,
      cost_usd, priced FROM rollup_requests
      WHERE bucket_ms = ? AND bucket_start >= ? AND bucket_start < ?`,
    edge: `SELECT ${column}, 1, 1, input_tokens, output_tokens, cost_usd, cost_usd IS NOT NULL
      FROM requests WHERE started_at >= ? AND started_at < ?`,
  };
}

/**
 * Where each grouping's sums come from, as (grp, requests, counted, input_tokens, output_tokens,
 * cost_usd, priced): the window's whole buckets from the rollups (db/rollups.ts; `rollup`, bound
 * for two ranges of each bucket size, `costBounds`), the part minutes at its ends from the rows
 * (`edge`, bound twice). Route and key: requests, from
 * `rollup_requests` and a range of requests_started. Upstream: hops, from `rollup_hops` and a
 * range of attempts_upstream_started per upstream (which has no index of its own on started_at),
 * where a failed-over request counts once per upstream it reached: at its first hop there, in
 * the rollups and the edges alike. `counted` is what makes a group appear (a request, a hop):
 * a rollup row can hold zeros, the old group of a request written open and then closed.
 */
const SOURCES: Record<CostGroup, Source> = {
  route: requestSource("route"),
  key: requestSource("key_id"),
  upstream: {
    rollup: `SELECT upstream, requests, hops, input_tokens, output_tokens, cost_usd, priced
      FROM rollup_hops WHERE bucket_ms = ? AND bucket_start >= ? AND bucket_start < ?`,
    edge: `SELECT a.upstream, NOT EXISTS (SELECT 1 FROM attempts e
        WHERE e.request_id = a.request_id AND e.upstream = a.upstream AND e.hop < a.hop),
      1, a.input_tokens, a.output_tokens, a.cost_usd, a.cost_usd IS NOT NULL
      FROM ups JOIN attempts a ON a.upstream = ups.u WHERE a.started_at >= ? AND a.started_at < ?`,
    upstreams: UPSTREAMS,
  },
};

/**
 * Groups ranked costliest first (then by requests); those past MAX_COST_GROUPS are summed into
 * one row (`rest` = 1, `grp` = how many groups it holds). Binds the six `costBounds`. Exported
 * so tests can check each part reads a range of an index (tests/db_history_indexes_test.ts).
 */
export function totalsSql(by: CostGroup): string {
  const { rollup, edge, upstreams } = SOURCES[by];
  return `WITH RECURSIVE ${upstreams ?? ""}parts(grp, requests, counted, input_tokens,
    output_tokens, cost_usd, priced) AS (${
    [...ROLLUP_BUCKETS_MS.flatMap(() => [rollup, rollup]), edge, edge].join(" UNION ALL ")
  }), g AS (
    SELECT substr(grp, 1, ${MAX_GROUP_CHARS}) AS grp, SUM(requests) AS requests,
      SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
      CASE WHEN SUM(priced) > 0 THEN SUM(cost_usd) END AS cost_usd
    FROM parts GROUP BY substr(grp, 1, ${MAX_GROUP_CHARS}) HAVING SUM(counted) > 0
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
 * The arguments of `totalsSql` for [since, until): the largest whole buckets inside it, then
 * within the parts left at each end the next size down, and so on; what is left below a minute
 * at each end is read from the rows. Each size has two ranges (one in the middle, or one at each
 * end) and the rows two: 30 days are 29 days, 95 quarter hours, 28 minutes and two part minutes
 * at most. Where retention has removed the rows of a part minute, that part counts nothing: the
 * report starts at most a minute late.
 */
export function costBounds(since: number, until: number): number[] {
  const ranges = new Map<number, [number, number][]>(ROLLUP_BUCKETS_MS.map((ms) => [ms, []]));
  const rows: [number, number][] = [];
  const split = (from: number, to: number, sizes: readonly number[]) => {
    const [size, ...finer] = sizes;
    if (size === undefined) {
      if (to > from) rows.push([from, to]);
      return;
    }
    const first = Math.ceil(from / size) * size;
    const last = Math.floor(to / size) * size;
    if (last <= first) return split(from, to, finer);
    ranges.get(size)?.push([first, last]);
    split(from, first, finer);
    split(last, to, finer);
  };
  split(since, until, [...ROLLUP_BUCKETS_MS].reverse());
  const args: number[] = [];
  for (const ms of ROLLUP_BUCKETS_MS) {
    for (const [from, to] of twoRanges(ranges.get(ms) ?? [])) args.push(ms, from, to);
  }
  for (const [from, to] of twoRanges(rows)) args.push(from, to);
  return args;
}

/** Exactly two ranges, empty ones added. */
function twoRanges(ranges: [number, number][]): [number, number][] {
  return [...ranges, [0, 0], [0, 0]].slice(0, 2) as [number, number][];
}

/**
 * Totals per group of requests (by upstream: hops) started in [since, until), costliest first:
 * at most MAX_COST_GROUPS groups, then one row `N more` summing the rest. The cost is the
 * window's minutes, not its rows (docs/scaling.md "Rollups").
 */
export async function costTotals(
  db: Reads,
  opts: { by: CostGroup; since: number; until: number },
): Promise<CostTotal[]> {
  const result = await readerOf(db).execute({
    sql: totalsSql(opts.by),
    args: costBounds(opts.since, opts.until),
  });
  return result.rows.map((row) => ({
    group: num(row, "rest") ? `${num(row, "grp")} more` : textOrNull(row, "grp"),
    requests: num(row, "requests"),
    inputTokens: num(row, "input_tokens"),
    outputTokens: num(row, "output_tokens"),
    costUsd: numOrNull(row, "cost_usd"),
  }));
}
