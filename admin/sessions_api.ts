/**
 * GET /admin/api/sessions: live and recent sessions (docs/admin.md "Sessions"), from history over
 * a window, with this process's running requests and session-limit counts joined in. Mounted
 * under the admin guard.
 */
import { configKey } from "../gateway/config/config_keys.ts";
import { type Context, Hono } from "hono";
import type { Reads } from "../db/read_db.ts";
import { recentSessions, type SessionRow } from "../db/session_queries.ts";
import type { Config } from "../gateway/config/schema.ts";
import type { RequestRecord } from "../db/records.ts";
import type { SessionLimits } from "../gateway/policy/session_limits.ts";
import type { SessionsView, SessionView } from "./sessions_types.ts";

const HOUR_MS = 3_600_000;
/** The default window, and the longest one asked for: a day, a week. */
const DEFAULT_WINDOW_MS = 24 * HOUR_MS;
const MAX_WINDOW_MS = 7 * 24 * HOUR_MS;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 200;

export interface SessionsDeps {
  /** Where history is read (the admin reader for a local file, db/worker_reads.ts). */
  db: Reads;
  now: () => number;
  config: () => Config | null;
  /** The requests running in this process now. */
  running: () => Iterable<RequestRecord>;
  sessionLimits?: SessionLimits;
}

export function sessionsApi(deps: SessionsDeps): Hono {
  const app = new Hono();
  app.get("/admin/api/sessions", async (c) => {
    const query = parseQuery(new URL(c.req.url).searchParams, deps.now());
    if (typeof query === "string") return badQuery(c, query);
    const rows = await recentSessions(deps.db, query);
    return c.json(sessionsView(rows, { ...query, deps }) satisfies SessionsView);
  });
  return app;
}

/** `since` (epoch ms, at most a week back; a day by default) and `limit` (1 to 200). */
function parseQuery(
  params: URLSearchParams,
  now: number,
): { since: number; limit: number } | string {
  let since = now - DEFAULT_WINDOW_MS;
  const asked = params.get("since");
  if (asked !== null) {
    if (!/^\d{1,15}$/.test(asked)) return "since must be epoch ms";
    since = Math.max(Number(asked), now - MAX_WINDOW_MS);
  }
  let limit = DEFAULT_LIMIT;
  const count = params.get("limit");
  if (count !== null) {
    if (!/^\d{1,4}$/.test(count) || Number(count) < 1) return `limit must be 1 to ${MAX_LIMIT}`;
    limit = Math.min(Number(count), MAX_LIMIT);
  }
  return { since, limit };
}

const pairKey = (keyId: string | null, sessionId: string) => JSON.stringify([keyId, sessionId]);

function sessionsView(
  rows: SessionRow[],
  opts: { since: number; limit: number; deps: SessionsDeps },
): SessionsView {
  const { deps } = opts;
  // Running requests per session; a session whose rows are not written yet is listed too.
  const running = new Map<string, { count: number; record: RequestRecord }>();
  for (const r of deps.running()) {
    if (r.sessionId === null) continue;
    const k = pairKey(r.keyId, r.sessionId);
    const seen = running.get(k);
    running.set(k, { count: (seen?.count ?? 0) + 1, record: seen?.record ?? r });
  }
  const listed = new Set(rows.map((row) => pairKey(row.keyId, row.sessionId)));
  const liveOnly: SessionRow[] = [...running].filter(([k]) => !listed.has(k))
    .map(([, { record }]) => emptyRow(record));
  const config = deps.config();
  const sessions = [...liveOnly, ...rows].slice(0, opts.limit).map((row): SessionView => {
    const key = config ? configKey(config, row.keyId) : undefined;
    const limits = key?.session_budget;
    return {
      ...row,
      derived: row.sessionId.startsWith("p:"),
      running: running.get(pairKey(row.keyId, row.sessionId))?.count ?? 0,
      cacheHitRate: row.inputTokens > 0 ? row.cachedTokens / row.inputTokens : null,
      budget: limits
        ? { limits, use: deps.sessionLimits?.use(row.keyId, row.sessionId) ?? null }
        : null,
    };
  });
  return { since: opts.since, sessions };
}

/** A session known only from a running request, before any of its rows is written. */
function emptyRow(r: RequestRecord): SessionRow {
  return {
    keyId: r.keyId,
    sessionId: r.sessionId ?? "",
    requests: 0,
    firstAt: r.startedAt,
    lastAt: r.startedAt,
    routes: r.route === null ? [] : [r.route],
    upstreams: r.upstream === null ? [] : [r.upstream],
    inputTokens: 0,
    outputTokens: 0,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    costUsd: null,
    moves: 0,
    moveCacheWriteUsd: null,
    errors: 0,
    budgetRefusals: 0,
    loopRefusals: 0,
  };
}

function badQuery(c: Context, message: string) {
  return c.json({ error: { code: "admin.bad_query", message } }, 400);
}
