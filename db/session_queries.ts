import { readerOf, type Reads } from "./read_db.ts";
import { num, numOrNull, text, textOrNull } from "./row_values.ts";

/** A session's use so far, as its budget counts it (docs/config.md "Session limits"). */
export interface SessionTotals {
  requests: number;
  tokens: number;
  costUsd: number;
}

// Requests that reached an upstream: the ones a session budget counts. Along
// `requests_session_started`, so the cost is the session's rows, not the table's.
const TOTALS = `SELECT COUNT(*) AS requests,
  SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)) AS tokens,
  SUM(cost_usd) AS cost_usd
  FROM requests WHERE session_id = ? AND key_id IS ? AND upstream IS NOT NULL`;

/** What history holds of one key's session: its requests, billed tokens and USD. */
export async function sessionTotals(
  db: Reads,
  opts: { keyId: string | null; sessionId: string },
): Promise<SessionTotals> {
  const result = await readerOf(db).execute({ sql: TOTALS, args: [opts.sessionId, opts.keyId] });
  const row = result.rows[0];
  return {
    requests: row ? num(row, "requests") : 0,
    tokens: row ? num(row, "tokens") : 0,
    costUsd: row ? num(row, "cost_usd") : 0,
  };
}

/** One recent session of one key, from its rows (docs/admin.md "Sessions"). */
export interface SessionRow {
  keyId: string | null;
  sessionId: string;
  requests: number;
  firstAt: number;
  lastAt: number;
  /** The routes and upstreams it reached (configured names, so a short list). */
  routes: string[];
  upstreams: string[];
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  costUsd: number | null;
  /** Requests that left the session's warm upstream, and what their cache writes cost. */
  moves: number;
  moveCacheWriteUsd: number | null;
  errors: number;
  budgetRefusals: number;
  loopRefusals: number;
}

/** The longest session id, route or upstream name read back (names are bounded when stored). */
const MAX_NAME_CHARS = 300;
/** At most this many routes and upstreams listed per session. */
const MAX_NAMES = 10;

// A range scan of `requests_started` over the window, grouped: the cost of one cost report.
// Routes count only where the request reached an upstream, so a caller's invented model names
// (each refused 404) never fill the list.
const RECENT = `SELECT key_id, substr(session_id, 1, ${MAX_NAME_CHARS}) AS session_id,
  COUNT(*) AS requests, MIN(started_at) AS first_at, MAX(started_at) AS last_at,
  json_group_array(DISTINCT CASE WHEN upstream IS NOT NULL
    THEN substr(route, 1, ${MAX_NAME_CHARS}) END) AS routes,
  json_group_array(DISTINCT substr(upstream, 1, ${MAX_NAME_CHARS})) AS upstreams,
  SUM(COALESCE(input_tokens, 0)) AS input_tokens, SUM(COALESCE(output_tokens, 0)) AS output_tokens,
  SUM(COALESCE(cached_tokens, 0)) AS cached_tokens,
  SUM(COALESCE(cache_write_tokens, 0)) AS cache_write_tokens,
  SUM(cost_usd) AS cost_usd,
  SUM(moved_from IS NOT NULL) AS moves,
  SUM(CASE WHEN moved_from IS NOT NULL THEN cache_write_usd END) AS move_cache_write_usd,
  SUM(outcome = 'error') AS errors,
  SUM(error_code = 'gw.session.budget_exhausted') AS budget_refusals,
  SUM(error_code = 'gw.session.loop_detected') AS loop_refusals
  FROM requests WHERE started_at >= ? AND session_id IS NOT NULL
  GROUP BY key_id, substr(session_id, 1, ${MAX_NAME_CHARS})
  ORDER BY last_at DESC LIMIT ?`;

function names(json: string): string[] {
  try {
    const list: unknown = JSON.parse(json);
    if (!Array.isArray(list)) return [];
    return list.filter((n): n is string => typeof n === "string").slice(0, MAX_NAMES);
  } catch {
    return [];
  }
}

/** The sessions with a request started at or after `since`, most recently active first. */
export async function recentSessions(
  db: Reads,
  opts: { since: number; limit: number },
): Promise<SessionRow[]> {
  const result = await readerOf(db).execute({ sql: RECENT, args: [opts.since, opts.limit] });
  return result.rows.map((row) => ({
    keyId: textOrNull(row, "key_id"),
    sessionId: text(row, "session_id"),
    requests: num(row, "requests"),
    firstAt: num(row, "first_at"),
    lastAt: num(row, "last_at"),
    routes: names(text(row, "routes")),
    upstreams: names(text(row, "upstreams")),
    inputTokens: num(row, "input_tokens"),
    outputTokens: num(row, "output_tokens"),
    cachedTokens: num(row, "cached_tokens"),
    cacheWriteTokens: num(row, "cache_write_tokens"),
    costUsd: numOrNull(row, "cost_usd"),
    moves: num(row, "moves"),
    moveCacheWriteUsd: numOrNull(row, "move_cache_write_usd"),
    errors: num(row, "errors"),
    budgetRefusals: num(row, "budget_refusals"),
    loopRefusals: num(row, "loop_refusals"),
  }));
}
