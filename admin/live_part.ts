import type { LiveRequest } from "../gateway/live/live_request.ts";
import type { LivePart, LiveRow, LiveSort, LiveStateCounts } from "./api_types.ts";
import type { LiveCursor, LiveQuery } from "./live_query.ts";

/**
 * A row's place in an order, as one number that grows down the list: oldest first by start,
 * newest first by start reversed, longest idle first by when content last moved (a request with
 * none yet counts from its start). Absolute times, so a row keeps its place from one tick to
 * the next and a cursor stays valid while the list moves.
 */
export function rankOf(row: LiveRow, opts: { sort: LiveSort; at: number }): number {
  switch (opts.sort) {
    case "oldest":
      return row.startedAt;
    case "newest":
      return -row.startedAt;
    case "idle":
      return row.idleMs === null ? row.startedAt : opts.at - row.idleMs;
  }
}

/** Order of two positions: by rank, then instance, then id, so no two rows tie. */
export function compareKeys(a: LiveCursor, b: LiveCursor): number {
  return a.rank - b.rank || cmp(a.instance, b.instance) || cmp(a.id, b.id);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The position of a row, as a cursor names it. */
export function keyOf(row: LiveRow, opts: { sort: LiveSort; at: number }): LiveCursor {
  return { rank: rankOf(row, opts), instance: row.instance, id: row.id };
}

/**
 * This instance's share of a live page: every running request is looked at once, to count it
 * and test the filters, but only the page's rows are built and kept (a bounded sorted list), so
 * the cost of a tick beyond counting follows the page size (docs/scaling.md).
 */
export function livePart(
  live: Iterable<LiveRequest>,
  opts: { query: LiveQuery; now: number; instance: string },
): LivePart {
  const { query, now, instance } = opts;
  const states: LiveStateCounts = {};
  let running = 0;
  let matching = 0;
  let skipped = 0;
  // Sorted by key, at most `limit` long: the best rows seen so far.
  const kept: { key: LiveCursor; live: LiveRequest }[] = [];
  const mine = query.instance === undefined || query.instance === instance;
  for (const l of live) {
    if (l.finished) continue;
    running++;
    states[l.state] = (states[l.state] ?? 0) + 1;
    if (!mine || !matches(l, query)) continue;
    matching++;
    const key = { rank: liveRank(l, query.sort), instance, id: l.record.id };
    if (query.after && compareKeys(key, query.after) <= 0) {
      skipped++;
      continue;
    }
    const last = kept[kept.length - 1];
    if (kept.length === query.limit && last && compareKeys(key, last.key) >= 0) continue;
    kept.splice(insertionPoint(kept, key), 0, { key, live: l });
    if (kept.length > query.limit) kept.pop();
  }
  return {
    instance,
    at: now,
    rows: kept.map((k) => liveRow(k.live, { now, instance })),
    running,
    matching,
    skipped,
    states,
  };
}

function insertionPoint(kept: { key: LiveCursor }[], key: LiveCursor): number {
  let lo = 0;
  let hi = kept.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareKeys(kept[mid]!.key, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function liveRank(l: LiveRequest, sort: LiveSort): number {
  const startedAt = l.record.startedAt;
  if (sort === "oldest") return startedAt;
  if (sort === "newest") return -startedAt;
  return l.lastContentAt ?? startedAt;
}

/** Whether a request passes the query's filters and search. */
function matches(l: LiveRequest, query: LiveQuery): boolean {
  const r = l.record;
  if (query.route !== undefined && r.route !== query.route) return false;
  if (query.upstream !== undefined && r.upstream !== query.upstream) return false;
  if (query.state !== undefined && l.state !== query.state) return false;
  if (query.key !== undefined && r.keyId !== query.key) return false;
  if (query.session !== undefined && !(r.sessionId ?? "").includes(query.session)) return false;
  const q = query.q;
  if (q === undefined) return true;
  return r.id.includes(q) || (r.sessionId ?? "").includes(q) || (r.keyId ?? "").includes(q);
}

export function liveRow(live: LiveRequest, opts: { now: number; instance: string }): LiveRow {
  const r = live.record;
  const { now } = opts;
  return {
    id: r.id,
    instance: opts.instance,
    sessionId: r.sessionId,
    keyId: r.keyId,
    clientFormat: r.clientFormat,
    route: r.route,
    stream: r.stream,
    upstream: r.upstream,
    hop: live.attempts.length,
    state: live.state,
    startedAt: r.startedAt,
    elapsedMs: Math.max(0, now - r.startedAt),
    idleMs: live.lastContentAt === null ? null : Math.max(0, now - live.lastContentAt),
    firstContentMs: r.firstContentMs,
    inputTokens: r.inputTokens,
    outputTokens: r.outputTokens,
    aborting: live.signal.aborted,
  };
}
