import type { Reads } from "../db/read_db.ts";
import {
  getRequest,
  HISTORY_OUTCOMES,
  listAttempts,
  listAttemptsFor,
  listRequests,
  type ListRequestsOptions,
} from "../db/history_queries.ts";
import type { RequestRecord } from "../db/records.ts";
import type { Config } from "../gateway/config/schema.ts";
import type { HistoryChoices, HistoryPage, RequestDetail } from "./api_types.ts";

/** Rows per history page when the page does not say, and the most it may ask for. */
export const HISTORY_PAGE = 50;
export const HISTORY_MAX_PAGE = 200;

export type HistoryQuery = { ok: true; options: ListRequestsOptions } | {
  ok: false;
  message: string;
};

/**
 * Reads the filters of GET /admin/api/requests: `route`, `upstream`, `outcome`, `session`,
 * `since` and `until` (epoch ms), `limit`, and the keyset cursor `before_at` + `before_id`.
 */
export function parseHistoryQuery(params: URLSearchParams): HistoryQuery {
  const text = (name: string) => params.get(name)?.trim() || undefined;
  const options: ListRequestsOptions = {
    route: text("route"),
    upstream: text("upstream"),
    sessionId: text("session"),
  };
  const outcome = text("outcome");
  if (outcome !== undefined) {
    const known = HISTORY_OUTCOMES.find((o) => o === outcome);
    if (!known) {
      return { ok: false, message: `outcome must be one of ${HISTORY_OUTCOMES.join(", ")}` };
    }
    options.outcome = known;
  }
  for (const name of ["since", "until", "limit", "before_at"] as const) {
    const value = text(name);
    if (value !== undefined && !/^\d+$/.test(value)) {
      return { ok: false, message: `${name} must be a whole number` };
    }
  }
  const number = (name: string) => {
    const value = text(name);
    return value === undefined ? undefined : Number(value);
  };
  options.since = number("since");
  options.until = number("until");
  options.limit = Math.min(HISTORY_MAX_PAGE, Math.max(1, number("limit") ?? HISTORY_PAGE));
  const beforeAt = number("before_at");
  const beforeId = params.get("before_id");
  if ((beforeAt === undefined) !== (beforeId === null)) {
    return { ok: false, message: "before_at and before_id go together" };
  }
  if (beforeAt !== undefined && beforeId !== null) {
    options.before = { startedAt: beforeAt, id: beforeId };
  }
  return { ok: true, options };
}

/**
 * The in-memory record of a request still running here. Its stored row is written when it opens,
 * before the body names the route, and again when it ends; the record in between is fresher.
 */
export type LiveRecord = (id: string) => RequestRecord | undefined;

function fresher(row: RequestRecord, live: LiveRecord): RequestRecord {
  if (row.state !== "open") return row;
  const record = live(row.id);
  return record ? { ...record } : row;
}

/** One page, newest first, each row with its hops in short. */
export async function historyPage(
  db: Reads,
  opts: { query: ListRequestsOptions; live: LiveRecord; config: Config | null },
): Promise<HistoryPage> {
  const options = opts.query;
  const limit = options.limit ?? HISTORY_PAGE;
  // One row more than shown tells whether an older page exists without a COUNT.
  const rows = await listRequests(db, { ...options, limit: limit + 1 });
  const page = rows.slice(0, limit);
  const chains = await listAttemptsFor(db, page.map((r) => r.id));
  const last = page.at(-1);
  return {
    requests: page.map((r) => ({
      ...fresher(r, opts.live),
      hops: (chains.get(r.id) ?? []).map((a) => ({
        hop: a.hop,
        upstream: a.upstream,
        outcome: a.outcome,
        status: a.status,
      })),
    })),
    next: rows.length > limit && last ? { startedAt: last.startedAt, id: last.id } : null,
    choices: historyChoices(opts.config),
  };
}

/** What the history filters offer: the configured routes and upstreams, and every outcome. */
export function historyChoices(config: Config | null): HistoryChoices {
  return {
    routes: config?.routes.map((r) => r.model) ?? [],
    upstreams: config?.upstreams.map((u) => u.id) ?? [],
    outcomes: [...HISTORY_OUTCOMES],
  };
}

export async function requestDetail(
  db: Reads,
  opts: { id: string; live: LiveRecord },
): Promise<RequestDetail | null> {
  const request = await getRequest(db, opts.id);
  if (!request) return null;
  return { request: fresher(request, opts.live), attempts: await listAttempts(db, opts.id) };
}
