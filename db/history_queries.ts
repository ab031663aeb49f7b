import type { InStatement, InValue } from "@libsql/client";
import { readerOf, type Reads } from "./read_db.ts";
import { ATTEMPT_FIELDS, attemptFromRow, REQUEST_FIELDS, requestFromRow } from "./history_rows.ts";
import type { AttemptRecord, RequestRecord } from "./records.ts";
import { num } from "./row_values.ts";

/** Where the previous page ended: the last row's `startedAt` and `id`. */
export interface RequestCursor {
  startedAt: number;
  id: string;
}

/**
 * What the history can be filtered by beside route and upstream: the request's result, or what
 * happened on the way (a hop that timed out, a second upstream, a lost hedge, a resumed answer).
 */
export const HISTORY_OUTCOMES = [
  "success",
  "error",
  "aborted",
  "client_disconnected",
  "idle_timeout",
  "idle_timeout_mid_stream",
  "failed_over",
  "hedged",
  "resumed",
] as const;
export type HistoryOutcome = typeof HISTORY_OUTCOMES[number];

export interface RequestFilter {
  route?: string;
  upstream?: string;
  outcome?: HistoryOutcome;
  sessionId?: string;
  state?: RequestRecord["state"];
  /** Inclusive lower bound on `startedAt` (epoch ms). */
  since?: number;
  /** Exclusive upper bound on `startedAt` (epoch ms). */
  until?: number;
}

export interface ListRequestsOptions extends RequestFilter {
  /** Page size, clamped to 1..MAX_PAGE (default DEFAULT_PAGE). */
  limit?: number;
  /** Continue after this row; pass the last row of the previous page. */
  before?: RequestCursor;
}

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;

const REQUEST_BY_ID = `SELECT ${REQUEST_FIELDS} FROM requests WHERE id = ?`;
const REQUEST_EXISTS = "SELECT 1 FROM requests WHERE id = ? LIMIT 1";
const ATTEMPTS_OF = `SELECT ${ATTEMPT_FIELDS} FROM attempts WHERE request_id = ? ORDER BY hop`;

export async function getRequest(db: Reads, id: string): Promise<RequestRecord | null> {
  const result = await readerOf(db).execute({ sql: REQUEST_BY_ID, args: [id] });
  const row = result.rows[0];
  return row === undefined ? null : requestFromRow(row);
}

/** Whether a row with this id exists: a primary-key lookup, cheap enough for every request. */
export async function requestExists(db: Reads, id: string): Promise<boolean> {
  const result = await readerOf(db).execute({ sql: REQUEST_EXISTS, args: [id] });
  return result.rows.length > 0;
}

/** A request's hops in the order they were sent. */
export async function listAttempts(db: Reads, requestId: string): Promise<AttemptRecord[]> {
  const result = await readerOf(db).execute({ sql: ATTEMPTS_OF, args: [requestId] });
  return result.rows.map(attemptFromRow);
}

/** Attempt chains for a page of requests in one query, keyed by request id. */
export async function listAttemptsFor(
  db: Reads,
  requestIds: readonly string[],
): Promise<Map<string, AttemptRecord[]>> {
  const chains = new Map<string, AttemptRecord[]>(requestIds.map((id) => [id, []]));
  if (requestIds.length === 0) return chains;
  const marks = requestIds.map(() => "?").join(", ");
  const result = await readerOf(db).execute({
    sql: `SELECT ${ATTEMPT_FIELDS} FROM attempts WHERE request_id IN (${marks}) ` +
      "ORDER BY request_id, hop",
    args: [...requestIds],
  });
  for (const attempt of result.rows.map(attemptFromRow)) {
    chains.get(attempt.requestId)?.push(attempt);
  }
  return chains;
}

/** Newest first, keyset-paged on (startedAt, id) so deep pages cost the same as the first. */
export async function listRequests(
  db: Reads,
  opts: ListRequestsOptions = {},
): Promise<RequestRecord[]> {
  const result = await readerOf(db).execute(listRequestsStatement(opts));
  return result.rows.map(requestFromRow);
}

export async function countRequests(db: Reads, filter: RequestFilter = {}): Promise<number> {
  const { where, args } = whereClause(filter);
  const result = await readerOf(db).execute({
    sql: `SELECT COUNT(*) AS n FROM ${source(filter)}${where}`,
    args,
  });
  const row = result.rows[0];
  return row === undefined ? 0 : num(row, "n");
}

/** Exported so tests can check the plan stays an index scan. */
export function listRequestsStatement(opts: ListRequestsOptions): InStatement {
  const { where, args } = whereClause(opts, opts.before);
  return {
    sql: `SELECT ${REQUEST_FIELDS} FROM ${source(opts)}${where} ` +
      "ORDER BY started_at DESC, id DESC LIMIT ?",
    args: [...args, pageSize(opts.limit)],
  };
}

/**
 * Without ANALYZE statistics SQLite walks the newest-first index for the few live rows, which
 * at a million rows reads the whole index; the partial index holds only those rows.
 */
function source(filter: RequestFilter): string {
  return filter.state === "open" ? "requests INDEXED BY requests_open" : "requests";
}

function pageSize(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit)) return DEFAULT_PAGE;
  return Math.min(MAX_PAGE, Math.max(1, Math.trunc(limit)));
}

const EQUALITY_FILTERS = [
  ["route", "route"],
  ["upstream", "upstream"],
  ["sessionId", "session_id"],
] as const;

const hopWhere = (term: string) =>
  `EXISTS (SELECT 1 FROM attempts a WHERE a.request_id = requests.id AND ${term})`;

// Literals only: none of these takes a caller's value. `outcome = 'error'` as a literal lets
// SQLite use the partial index of failed requests (`requests_errors`); a row with an error code
// always has that outcome (gateway/live/live_request.ts `finish`, db/instances.ts).
const OUTCOME_TERMS: Record<HistoryOutcome, string> = {
  success: "outcome = 'success'",
  error: "outcome = 'error'",
  aborted: "outcome = 'error' AND error_code = 'gw.request.aborted'",
  client_disconnected: "outcome = 'error' AND error_code = 'gw.client.disconnected'",
  idle_timeout: hopWhere(
    "a.error_code IN ('gw.upstream.idle_timeout', 'gw.upstream.first_content_timeout')",
  ),
  idle_timeout_mid_stream: hopWhere("a.error_code = 'gw.upstream.idle_timeout_mid_stream'"),
  failed_over: hopWhere(
    "EXISTS (SELECT 1 FROM attempts b WHERE b.request_id = a.request_id AND b.upstream <> a.upstream)",
  ),
  hedged: hopWhere("a.outcome = 'hedge_lost'"),
  resumed: hopWhere("a.outcome = 'resumed'"),
};

// Spelled as literals, not bound, so `state = 'open'` can use the partial index of live rows.
const STATE_TERMS: Record<RequestRecord["state"], string> = {
  open: "state = 'open'",
  closed: "state = 'closed'",
  interrupted: "state = 'interrupted'",
};

function whereClause(
  filter: RequestFilter,
  before?: RequestCursor,
): { where: string; args: InValue[] } {
  const terms: string[] = [];
  const args: InValue[] = [];
  for (const [field, column] of EQUALITY_FILTERS) {
    const value = filter[field];
    if (value === undefined) continue;
    terms.push(`${column} = ?`);
    args.push(value);
  }
  if (filter.state !== undefined) terms.push(STATE_TERMS[filter.state]);
  if (filter.outcome !== undefined) terms.push(OUTCOME_TERMS[filter.outcome]);
  if (filter.since !== undefined) {
    terms.push("started_at >= ?");
    args.push(filter.since);
  }
  if (filter.until !== undefined) {
    terms.push("started_at < ?");
    args.push(filter.until);
  }
  if (before !== undefined) {
    terms.push("(started_at, id) < (?, ?)");
    args.push(before.startedAt, before.id);
  }
  return { where: terms.length === 0 ? "" : ` WHERE ${terms.join(" AND ")}`, args };
}
