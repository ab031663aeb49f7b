import type { HistoryOutcome, ListRequestsOptions } from "../db/history_queries.ts";
import type { Config } from "../gateway/config/schema.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import type { HistoryPage, RequestDetail } from "./api_types.ts";
import { HISTORY_PAGE, historyChoices, type LiveRecord } from "./history_api.ts";

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
  opts: { query: ListRequestsOptions; live: LiveRecord; config?: Config | null },
): HistoryPage {
  const q = opts.query;
  const limit = q.limit ?? HISTORY_PAGE;
  const matching = rows.requests
    .map((r) => r.state === "open" ? { ...(opts.live(r.id) ?? r) } : r)
    .filter((r) =>
      (q.route === undefined || r.route === q.route) &&
      (q.upstream === undefined || r.upstream === q.upstream) &&
      (q.outcome === undefined ||
        hasOutcome(r, { outcome: q.outcome, hops: hopsOf(rows, r.id) })) &&
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
    choices: historyChoices(opts.config ?? null),
  };
}

/** The outcome filters as `listRequests` reads them in SQL (db/history_queries.ts). */
function hasOutcome(
  request: RequestRecord,
  opts: { outcome: HistoryOutcome; hops: AttemptRecord[] },
): boolean {
  const hop = (test: (a: AttemptRecord) => boolean) => opts.hops.some(test);
  switch (opts.outcome) {
    case "success":
    case "error":
      return request.outcome === opts.outcome;
    case "aborted":
      return request.errorCode === "gw.request.aborted";
    case "client_disconnected":
      return request.errorCode === "gw.client.disconnected";
    case "idle_timeout":
      return hop((a) =>
        a.errorCode === "gw.upstream.idle_timeout" ||
        a.errorCode === "gw.upstream.first_content_timeout"
      );
    case "idle_timeout_mid_stream":
      return hop((a) => a.errorCode === "gw.upstream.idle_timeout_mid_stream");
    case "failed_over":
      return new Set(opts.hops.map((a) => a.upstream)).size > 1;
    case "hedged":
      return hop((a) => a.outcome === "hedge_lost");
    case "resumed":
      return hop((a) => a.outcome === "resumed");
  }
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
