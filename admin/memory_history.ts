import type { ListRequestsOptions } from "../db/history_queries.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import type { HistoryPage, RequestDetail } from "./api_types.ts";
import { HISTORY_PAGE, type LiveRecord } from "./history_api.ts";

/** History rows held in memory while no database takes them (docs/deploy.md). */
export interface MemoryRows {
  requests: RequestRecord[];
  attempts: AttemptRecord[];
}

/**
 * The same page as `historyPage`, read from the rows in memory: the same filters, newest first,
 * the same keyset cursor. The rows are few (bounded by the writer's queue), so a scan does.
 */
export function memoryHistoryPage(
  rows: MemoryRows,
  opts: { query: ListRequestsOptions; live: LiveRecord },
): HistoryPage {
  const q = opts.query;
  const limit = q.limit ?? HISTORY_PAGE;
  const matching = rows.requests
    .map((r) => r.state === "open" ? { ...(opts.live(r.id) ?? r) } : r)
    .filter((r) =>
      (q.route === undefined || r.route === q.route) &&
      (q.upstream === undefined || r.upstream === q.upstream) &&
      (q.outcome === undefined || r.outcome === q.outcome) &&
      (q.sessionId === undefined || r.sessionId === q.sessionId) &&
      (q.state === undefined || r.state === q.state) &&
      (q.since === undefined || r.startedAt >= q.since) &&
      (q.until === undefined || r.startedAt < q.until) &&
      (q.before === undefined || r.startedAt < q.before.startedAt ||
        (r.startedAt === q.before.startedAt && r.id < q.before.id))
    )
    .sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const page = matching.slice(0, limit);
  const last = page.at(-1);
  return {
    requests: page.map((r) => ({
      ...r,
      hops: hopsOf(rows, r.id).map((a) => ({
        hop: a.hop,
        upstream: a.upstream,
        outcome: a.outcome,
        status: a.status,
      })),
    })),
    next: matching.length > limit && last ? { startedAt: last.startedAt, id: last.id } : null,
  };
}

export function memoryRequestDetail(
  rows: MemoryRows,
  opts: { id: string; live: LiveRecord },
): RequestDetail | null {
  const request = rows.requests.find((r) => r.id === opts.id);
  if (!request) return null;
  const fresh = request.state === "open" ? opts.live(request.id) ?? request : request;
  return { request: { ...fresh }, attempts: hopsOf(rows, opts.id) };
}

function hopsOf(rows: MemoryRows, id: string): AttemptRecord[] {
  return rows.attempts.filter((a) => a.requestId === id).sort((a, b) => a.hop - b.hop);
}
