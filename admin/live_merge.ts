import type { LivePart, LiveRow, LiveSnapshot, LiveStateCounts } from "./api_types.ts";
import { compareKeys, keyOf } from "./live_part.ts";
import { formatCursor, type LiveQuery } from "./live_query.ts";

export interface MergeOptions {
  query: LiveQuery;
  /** This instance's clock: the snapshot's time. */
  at: number;
  /** Every live instance, this one first. */
  instances: string[];
  /** Those that gave no usable answer. */
  silent: string[];
  choices: LiveSnapshot["choices"];
}

/**
 * One page of the fleet's live list from each instance's share: the shares are each sorted and
 * at most a page long, so the page is the first `limit` of their merge; counts are summed. Each
 * peer's rows are placed by its own clock (`at`), as it measured them.
 */
export function mergeParts(parts: readonly LivePart[], opts: MergeOptions): LiveSnapshot {
  const { query } = opts;
  const keyed = parts.flatMap((part) =>
    part.rows.map((row) => ({ row, key: keyOf(row, { sort: query.sort, at: part.at }) }))
  );
  keyed.sort((a, b) => compareKeys(a.key, b.key));
  const page = keyed.slice(0, query.limit);
  const states: LiveStateCounts = {};
  let running = 0;
  let matching = 0;
  let offset = 0;
  for (const part of parts) {
    running += part.running;
    matching += part.matching;
    offset += part.skipped;
    for (const [state, n] of Object.entries(part.states) as [keyof LiveStateCounts, number][]) {
      states[state] = (states[state] ?? 0) + n;
    }
  }
  const last = page[page.length - 1];
  const more = offset + page.length < matching;
  return {
    at: opts.at,
    requests: page.map((k): LiveRow => k.row),
    totals: { running, matching, states },
    page: {
      sort: query.sort,
      offset,
      limit: query.limit,
      next: more && last ? formatCursor(last.key) : null,
    },
    instances: { total: opts.instances.length, ids: opts.instances, silent: opts.silent },
    choices: opts.choices,
  };
}
