import { readerOf, type Reads } from "./read_db.ts";
import { num, numOrNull, text, textOrNull } from "./row_values.ts";
import { SUMMARY_NAMES } from "./session_summaries.ts";

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

// The sessions' summaries (db/session_summaries.ts), newest first along `session_summaries_last`:
// the cost follows the sessions listed, not their rows. A summary holds the whole session as
// history has it, not only its requests inside the window (docs/admin.md "Sessions").
const RECENT = `SELECT CASE WHEN typeof(key_id) = 'blob' THEN NULL ELSE key_id END AS key_id,
  session_id, requests, first_at, last_at, routes, upstreams, input_tokens, output_tokens,
  cached_tokens, cache_write_tokens, CASE WHEN priced > 0 THEN cost_usd END AS cost_usd, moves,
  CASE WHEN move_priced > 0 THEN move_cache_write_usd END AS move_cache_write_usd, errors,
  budget_refusals, loop_refusals
  FROM session_summaries WHERE last_at >= ? AND requests > 0 ORDER BY last_at DESC LIMIT ?`;

function names(json: string): string[] {
  try {
    const list: unknown = JSON.parse(json);
    if (!Array.isArray(list)) return [];
    return list.filter((n): n is string => typeof n === "string").slice(0, SUMMARY_NAMES);
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
