/**
 * Fills a history database fast, with rows shaped like the gateway's own (db/history_rows.ts):
 * UUIDv7 request ids in time order, one instance id, a few routes, keys and upstreams, a session
 * on a third of the requests, one hop each and a second on one in twenty (a failover, whose
 * first hop and request carry an upstream error). One recursive-CTE INSERT per chunk for each
 * table: ten million requests take minutes, where the writer would take an hour.
 */
import type { Db } from "../db/client.ts";

export interface FillOptions {
  requests: number;
  /** The newest request starts here (epoch ms); the others go back evenly over `days`. */
  now: number;
  days: number;
  /** Requests per transaction. */
  chunk?: number;
  onChunk?: (done: number) => void;
}

// As `newInstanceId` makes them (gateway/start/open_history.ts); override to measure a longer one.
export const INSTANCE = Deno.env.get("FILL_INSTANCE_ID") ?? "3f9c2a7be41d5068";

// n: 0 .. count-1 within the chunk; `first` the index of its first request overall.
const SERIES = `WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < ?)`;

// Per request, from its index i (deterministic, so the attempts see the same values).
const AT = "(? + (? + n) * ?)"; // first start + i * spacing
const I = "(? + n)";

function id(at: string, i: string): string {
  // 8-4-4-4-12 hex: 48 bits of the time, version 7, then bits from the index.
  return `printf('%08x-%04x-7%03x-%04x-%012x', ${at} / 65536, ${at} % 65536, ` +
    `(${i} * 2654435761) % 4096, 32768 + (${i} * 40503) % 16384, ` +
    `((${i} * 2654435761) % 4294967291) * 65536 + ${i} % 65536)`;
}

const ROUTES = ["smart", "fast", "claude-sonnet-4-5", "gpt-5"];
const UPSTREAMS = ["claude", "openai", "openai-b", "bedrock"];
const MODELS = ["claude-sonnet-4-5-20250929", "gpt-5", "gpt-5", "anthropic.claude-sonnet-4-5"];
const FORMATS = ["anthropic", "openai-chat", "openai-responses", "anthropic"];
const KEYS = ["app1", "app2", "ci", "agent"];
const ERROR_MESSAGE = 'upstream answered 529: {"type":"error","error":{"type":"overloaded_error",' +
  '"message":"Overloaded"}}';

function pick(list: string[], i: string): string {
  return `(CASE ${i} % ${list.length} ${
    list.map((v, k) => `WHEN ${k} THEN '${v}'`).join(" ")
  } END)`;
}

function requestsInsert(): string {
  const at = AT;
  const i = I;
  const failed = `(${i} % 20 = 7)`;
  return `${SERIES} INSERT INTO requests (id, instance_id, state, started_at, ended_at,
    client_format, route, stream, key_id, session_id, status, outcome, failure_source,
    error_code, error_message, upstream, upstream_model, first_content_ms, duration_ms,
    input_tokens, output_tokens, cached_tokens, reasoning_tokens, tokens_estimated, usage_source,
    cost_usd, cache_write_tokens, cache_write_1h_tokens, cache_write_usd, moved_from)
  SELECT ${id(at, i)}, '${INSTANCE}', 'closed', ${at}, ${at} + 800 + ${i} % 9000,
    ${pick(FORMATS, i)}, ${pick(ROUTES, `(${i} / 3)`)}, ${i} % 4 <> 0, ${pick(KEYS, `(${i} / 7)`)},
    CASE WHEN ${i} % 3 = 0 THEN printf('sess-%08x', ${i} / 40) END,
    200, 'success', NULL, NULL, NULL,
    ${pick(UPSTREAMS, `(${i} + ${failed})`)}, ${pick(MODELS, `(${i} + ${failed})`)},
    300 + ${i} % 700, 800 + ${i} % 9000, 1200 + ${i} % 30000, 50 + ${i} % 2000,
    CASE WHEN ${i} % 2 = 0 THEN 1000 + ${i} % 20000 END, NULL, 0, 'upstream',
    0.0001 * (${i} % 900), CASE WHEN ${i} % 10 = 0 THEN 500 END, NULL,
    CASE WHEN ${i} % 10 = 0 THEN 0.0019 END, NULL
  FROM s`;
}

function attemptsInsert(hop: 1 | 2): string {
  const at = AT;
  const i = I;
  const failed = `(${i} % 20 = 7)`;
  const select = hop === 1
    ? `SELECT ${id(at, i)}, 1, ${pick(UPSTREAMS, i)}, ${pick(MODELS, i)},
      CASE WHEN ${failed} THEN 'error' ELSE 'success' END,
      CASE WHEN ${failed} THEN 529 ELSE 200 END,
      CASE WHEN ${failed} THEN 'gw.upstream.overloaded' END,
      CASE WHEN ${failed} THEN '${ERROR_MESSAGE}' END,
      ${at} + 2, 120 + ${i} % 300, CASE WHEN ${failed} THEN NULL ELSE 300 + ${i} % 700 END,
      CASE WHEN ${failed} THEN 150 ELSE 800 + ${i} % 9000 END,
      CASE WHEN ${failed} THEN NULL ELSE 1200 + ${i} % 30000 END,
      CASE WHEN ${failed} THEN NULL ELSE 50 + ${i} % 2000 END, 0,
      CASE WHEN ${failed} THEN NULL ELSE 'upstream' END, NULL,
      CASE WHEN ${failed} THEN NULL ELSE 0.0001 * (${i} % 900) END, NULL,
      CASE WHEN ${i} % 2 = 0 THEN 1000 + ${i} % 20000 END,
      CASE WHEN ${i} % 10 = 0 THEN 500 END, NULL, CASE WHEN ${i} % 10 = 0 THEN 0.0019 END, NULL
    FROM s`
    : `SELECT ${id(at, i)}, 2, ${pick(UPSTREAMS, `(${i} + 1)`)}, ${pick(MODELS, `(${i} + 1)`)},
      'success', 200, NULL, NULL, ${at} + 160, 120, 300 + ${i} % 700, 800 + ${i} % 9000,
      1200 + ${i} % 30000, 50 + ${i} % 2000, 0, 'upstream', NULL, 0.0001 * (${i} % 900), NULL,
      NULL, NULL, NULL, NULL, NULL
    FROM s WHERE ${failed}`;
  return `${SERIES} INSERT INTO attempts (request_id, hop, upstream, model, outcome, status,
    error_code, error_message, started_at, headers_ms, first_content_ms, duration_ms,
    input_tokens, output_tokens, tokens_estimated, usage_source, dropped_headers, cost_usd,
    resume_offset, cached_tokens, cache_write_tokens, cache_write_1h_tokens, cache_write_usd,
    moved_from) ${select}`;
}

/** Appends `requests` requests (and their hops) ending at `now`; answers how long it took. */
export async function fillHistory(db: Db, opts: FillOptions): Promise<number> {
  const started = performance.now();
  const chunk = Math.max(1, opts.chunk ?? 100_000);
  const spacing = Math.max(1, Math.floor((opts.days * 86_400_000) / Math.max(1, opts.requests)));
  const firstAt = opts.now - spacing * opts.requests;
  const statements = [requestsInsert(), attemptsInsert(1), attemptsInsert(2)];
  for (let first = 0; first < opts.requests; first += chunk) {
    const count = Math.min(chunk, opts.requests - first);
    // Every `?` in order: the series bound, then (firstAt, first, spacing) for each AT, and
    // `first` for each I, as they occur in the text.
    await db.client.batch(
      statements.map((sql) => ({ sql, args: argsFor(sql, { count, first, firstAt, spacing }) })),
      "write",
    );
    opts.onChunk?.(first + count);
  }
  return performance.now() - started;
}

function argsFor(
  sql: string,
  v: { count: number; first: number; firstAt: number; spacing: number },
): number[] {
  const args: number[] = [v.count];
  // Walk the placeholders after the series: AT contributes three, I one.
  const body = sql.slice(SERIES.length);
  const tokens = body.match(/\(\? \+ \(\? \+ n\) \* \?\)|\(\? \+ n\)/g) ?? [];
  for (const token of tokens) {
    if (token.startsWith("(? + (?")) args.push(v.firstAt, v.first, v.spacing);
    else args.push(v.first);
  }
  return args;
}
