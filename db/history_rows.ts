import type { InStatement, InValue } from "@libsql/client";
import type { ReadRow as Row } from "./read_db.ts";
import {
  type AttemptOutcome,
  type AttemptRow,
  type FailureSource,
  type RequestRow,
  USAGE_SOURCES,
} from "./records.ts";
import {
  bindFlag,
  bindNumber,
  flag,
  memberOrNull,
  num,
  numOrNull,
  text,
  textOrNull,
} from "./row_values.ts";

// Typed as Record<keyof ...> so adding a row field fails to compile until it has a column.
export const REQUEST_COLUMNS: Record<keyof RequestRow, string> = {
  id: "id",
  instanceId: "instance_id",
  state: "state",
  startedAt: "started_at",
  endedAt: "ended_at",
  clientFormat: "client_format",
  route: "route",
  stream: "stream",
  keyId: "key_id",
  sessionId: "session_id",
  status: "status",
  outcome: "outcome",
  failureSource: "failure_source",
  errorCode: "error_code",
  errorMessage: "error_message",
  upstream: "upstream",
  upstreamModel: "upstream_model",
  firstContentMs: "first_content_ms",
  durationMs: "duration_ms",
  inputTokens: "input_tokens",
  outputTokens: "output_tokens",
  cachedTokens: "cached_tokens",
  reasoningTokens: "reasoning_tokens",
  tokensEstimated: "tokens_estimated",
  usageSource: "usage_source",
  costUsd: "cost_usd",
  cacheWriteTokens: "cache_write_tokens",
  cacheWrite1hTokens: "cache_write_1h_tokens",
  cacheWriteUsd: "cache_write_usd",
  movedFrom: "moved_from",
  toolServer: "tool_server",
  bytesIn: "bytes_in",
  bytesOut: "bytes_out",
};

export const ATTEMPT_COLUMNS: Record<keyof AttemptRow, string> = {
  requestId: "request_id",
  hop: "hop",
  upstream: "upstream",
  model: "model",
  outcome: "outcome",
  status: "status",
  errorCode: "error_code",
  errorMessage: "error_message",
  startedAt: "started_at",
  headersMs: "headers_ms",
  firstContentMs: "first_content_ms",
  durationMs: "duration_ms",
  inputTokens: "input_tokens",
  outputTokens: "output_tokens",
  tokensEstimated: "tokens_estimated",
  usageSource: "usage_source",
  droppedHeaders: "dropped_headers",
  costUsd: "cost_usd",
  resumeOffset: "resume_offset",
  cachedTokens: "cached_tokens",
  cacheWriteTokens: "cache_write_tokens",
  cacheWrite1hTokens: "cache_write_1h_tokens",
  cacheWriteUsd: "cache_write_usd",
  movedFrom: "moved_from",
};

/**
 * Appends a row's values to `out` in its table's column order (the order of the `*_COLUMNS`
 * keys), one property read each: reading fields by name in a loop cost several times as much, on
 * the serving thread, for every row of every batch. One `push` keeps `out` a packed array, which
 * the worker message copies far faster than one with holes. `tests/history_record_test.ts`
 * checks both writers against the column order.
 */
type ValueWriter<T> = (record: T, out: InValue[]) => void;

export const writeRequestValues: ValueWriter<RequestRow> = (r, out) => {
  out.push(
    r.id ?? null,
    r.instanceId ?? null,
    r.state ?? null,
    bindNumber(r.startedAt),
    bindNumber(r.endedAt),
    r.clientFormat ?? null,
    r.route ?? null,
    bindFlag(r.stream),
    r.keyId ?? null,
    r.sessionId ?? null,
    bindNumber(r.status),
    r.outcome ?? null,
    r.failureSource ?? null,
    r.errorCode ?? null,
    r.errorMessage ?? null,
    r.upstream ?? null,
    r.upstreamModel ?? null,
    bindNumber(r.firstContentMs),
    bindNumber(r.durationMs),
    bindNumber(r.inputTokens),
    bindNumber(r.outputTokens),
    bindNumber(r.cachedTokens),
    bindNumber(r.reasoningTokens),
    bindFlag(r.tokensEstimated),
    r.usageSource ?? null,
    bindNumber(r.costUsd),
    bindNumber(r.cacheWriteTokens),
    bindNumber(r.cacheWrite1hTokens),
    bindNumber(r.cacheWriteUsd),
    r.movedFrom ?? null,
    r.toolServer ?? null,
    bindNumber(r.bytesIn),
    bindNumber(r.bytesOut),
  );
};

export const writeAttemptValues: ValueWriter<AttemptRow> = (a, out) => {
  out.push(
    a.requestId ?? null,
    bindNumber(a.hop),
    a.upstream ?? null,
    a.model ?? null,
    a.outcome ?? null,
    bindNumber(a.status),
    a.errorCode ?? null,
    a.errorMessage ?? null,
    bindNumber(a.startedAt),
    bindNumber(a.headersMs),
    bindNumber(a.firstContentMs),
    bindNumber(a.durationMs),
    bindNumber(a.inputTokens),
    bindNumber(a.outputTokens),
    bindFlag(a.tokensEstimated),
    a.usageSource ?? null,
    a.droppedHeaders ?? null,
    bindNumber(a.costUsd),
    bindNumber(a.resumeOffset),
    bindNumber(a.cachedTokens),
    bindNumber(a.cacheWriteTokens),
    bindNumber(a.cacheWrite1hTokens),
    bindNumber(a.cacheWriteUsd),
    a.movedFrom ?? null,
  );
};

/**
 * The longest a text column is read back. Rows are bounded when written (docs/security.md "Names
 * are bounded"), but a row stored before that, or a message an upstream filled, must not make one
 * history page megabytes long: the admin API once failed whole on 24 rows of 12 MB names.
 */
export const MAX_READ_CHARS = 2_100;

/** Columns read back at most MAX_READ_CHARS long; the ids are not (they are keys and cursors). */
const BOUNDED_COLUMNS = new Set([
  "route",
  "key_id",
  "session_id",
  "error_code",
  "error_message",
  "upstream",
  "upstream_model",
  "model",
  "dropped_headers",
  "moved_from",
  "tool_server",
]);

function selectList(columns: Record<string, string>): string {
  return Object.values(columns).map((column) =>
    BOUNDED_COLUMNS.has(column) ? `substr(${column}, 1, ${MAX_READ_CHARS}) AS ${column}` : column
  ).join(", ");
}

/** `SELECT` lists for the two tables with their text columns bounded (MAX_READ_CHARS). */
export const REQUEST_FIELDS = selectList(REQUEST_COLUMNS);
export const ATTEMPT_FIELDS = selectList(ATTEMPT_COLUMNS);

const REQUEST_STATES: Record<RequestRow["state"], true> = {
  open: true,
  closed: true,
  interrupted: true,
};
const REQUEST_OUTCOMES: Record<NonNullable<RequestRow["outcome"]>, true> = {
  success: true,
  error: true,
};
const FAILURE_SOURCES: Record<FailureSource, true> = {
  upstream: true,
  timeout: true,
  aborted: true,
  client: true,
  gateway: true,
  config: true,
};
/** Every attempt outcome, for reading a stored one back (an unknown word reads as null). */
export const ATTEMPT_OUTCOMES: Record<AttemptOutcome, true> = {
  success: true,
  error: true,
  idle_timeout: true,
  aborted: true,
  client_disconnected: true,
  hedge_lost: true,
  resumed: true,
  replay_diverged: true,
};

interface Table<T> {
  readonly name: string;
  readonly columns: readonly string[];
  readonly values: ValueWriter<T>;
  readonly keys: readonly string[];
  readonly rowsPerStatement: number;
  /** SQL condition on the stored row; a conflicting row is only updated where it holds. */
  readonly updateWhere?: string;
  /**
   * The statement for each row count, built on first use. Row counts are powers of two, so a
   * handful of texts serve every batch: the worker prepares each once and keeps it
   * (db/history_worker.ts), and the executor sends each text once (db/batch_executor.ts).
   */
  readonly sqlByRows: string[];
}

// Rows per statement are bounded by bound parameters; 999 is the oldest SQLite default limit,
// safe on any server.
const MAX_PARAMS = 999;

/** The largest power of two at most `n` (n >= 1). */
function powerOfTwoAtMost(n: number): number {
  return 2 ** Math.floor(Math.log2(n));
}

function table<T>(
  name: string,
  opts: {
    columns: Record<keyof T, string>;
    values: ValueWriter<T>;
    keys: string[];
    updateWhere?: string;
  },
): Table<T> {
  const columns = Object.values<string>(opts.columns);
  const rowsPerStatement = powerOfTwoAtMost(Math.max(1, Math.floor(MAX_PARAMS / columns.length)));
  return {
    name,
    columns,
    values: opts.values,
    keys: opts.keys,
    rowsPerStatement,
    updateWhere: opts.updateWhere,
    sqlByRows: [],
  };
}

// A closed row is final: a later row with the same id (a reused x-request-id that slipped past
// the 409 check) must not replace its key, route or status (docs/security.md).
const REQUESTS = table<RequestRow>("requests", {
  columns: REQUEST_COLUMNS,
  values: writeRequestValues,
  keys: ["id"],
  updateWhere: "requests.state <> 'closed'",
});
// Likewise an ended hop (outcome set) is final.
const ATTEMPTS = table<AttemptRow>("attempts", {
  columns: ATTEMPT_COLUMNS,
  values: writeAttemptValues,
  keys: ["request_id", "hop"],
  updateWhere: "attempts.outcome IS NULL",
});

function upsertSql<T>(into: Table<T>, rowCount: number): string {
  const updates = into.columns
    .filter((column) => !into.keys.includes(column))
    .map((column) => `${column} = excluded.${column}`);
  const tuple = `(${into.columns.map(() => "?").join(", ")})`;
  return `INSERT INTO ${into.name} (${into.columns.join(", ")}) ` +
    `VALUES ${Array.from({ length: rowCount }, () => tuple).join(", ")} ` +
    `ON CONFLICT (${into.keys.join(", ")}) DO UPDATE SET ${updates.join(", ")}` +
    (into.updateWhere ? ` WHERE ${into.updateWhere}` : "");
}

/**
 * Upserts in statements of a power-of-two row count up to the parameter limit: 100 rows are
 * 32 + 32 + 32 + 4. Each value is read from the record as it is now and bound once; no copy of
 * the record is made. Keys must be unique.
 */
function upsertMany<T>(into: Table<T>, records: readonly T[]): InStatement[] {
  const statements: InStatement[] = [];
  const { rowsPerStatement, values } = into;
  for (let start = 0; start < records.length;) {
    const rows = powerOfTwoAtMost(Math.min(rowsPerStatement, records.length - start));
    const args: InValue[] = [];
    for (let row = start; row < start + rows; row++) values(records[row]!, args);
    statements.push({ sql: into.sqlByRows[rows] ??= upsertSql(into, rows), args });
    start += rows;
  }
  return statements;
}

export function upsertRequests(records: readonly RequestRow[]): InStatement[] {
  return upsertMany(REQUESTS, records);
}

export function upsertAttempts(records: readonly AttemptRow[]): InStatement[] {
  return upsertMany(ATTEMPTS, records);
}

export function requestFromRow(row: Row): RequestRow {
  return {
    id: text(row, "id"),
    instanceId: text(row, "instance_id"),
    state: memberOrNull(row, { column: "state", members: REQUEST_STATES }) ?? "closed",
    startedAt: num(row, "started_at"),
    endedAt: numOrNull(row, "ended_at"),
    clientFormat: text(row, "client_format"),
    route: textOrNull(row, "route"),
    stream: flag(row, "stream"),
    keyId: textOrNull(row, "key_id"),
    sessionId: textOrNull(row, "session_id"),
    status: numOrNull(row, "status"),
    outcome: memberOrNull(row, { column: "outcome", members: REQUEST_OUTCOMES }),
    failureSource: memberOrNull(row, { column: "failure_source", members: FAILURE_SOURCES }),
    errorCode: textOrNull(row, "error_code"),
    errorMessage: textOrNull(row, "error_message"),
    upstream: textOrNull(row, "upstream"),
    upstreamModel: textOrNull(row, "upstream_model"),
    firstContentMs: numOrNull(row, "first_content_ms"),
    durationMs: numOrNull(row, "duration_ms"),
    inputTokens: numOrNull(row, "input_tokens"),
    outputTokens: numOrNull(row, "output_tokens"),
    cachedTokens: numOrNull(row, "cached_tokens"),
    reasoningTokens: numOrNull(row, "reasoning_tokens"),
    tokensEstimated: flag(row, "tokens_estimated"),
    usageSource: memberOrNull(row, { column: "usage_source", members: USAGE_SOURCES }),
    costUsd: numOrNull(row, "cost_usd"),
    cacheWriteTokens: numOrNull(row, "cache_write_tokens"),
    cacheWrite1hTokens: numOrNull(row, "cache_write_1h_tokens"),
    cacheWriteUsd: numOrNull(row, "cache_write_usd"),
    movedFrom: textOrNull(row, "moved_from"),
    toolServer: textOrNull(row, "tool_server"),
    bytesIn: numOrNull(row, "bytes_in"),
    bytesOut: numOrNull(row, "bytes_out"),
  };
}

export function attemptFromRow(row: Row): AttemptRow {
  return {
    requestId: text(row, "request_id"),
    hop: num(row, "hop"),
    upstream: text(row, "upstream"),
    model: text(row, "model"),
    outcome: memberOrNull(row, { column: "outcome", members: ATTEMPT_OUTCOMES }),
    status: numOrNull(row, "status"),
    errorCode: textOrNull(row, "error_code"),
    errorMessage: textOrNull(row, "error_message"),
    startedAt: num(row, "started_at"),
    headersMs: numOrNull(row, "headers_ms"),
    firstContentMs: numOrNull(row, "first_content_ms"),
    durationMs: numOrNull(row, "duration_ms"),
    inputTokens: numOrNull(row, "input_tokens"),
    outputTokens: numOrNull(row, "output_tokens"),
    tokensEstimated: flag(row, "tokens_estimated"),
    usageSource: memberOrNull(row, { column: "usage_source", members: USAGE_SOURCES }),
    droppedHeaders: textOrNull(row, "dropped_headers"),
    costUsd: numOrNull(row, "cost_usd"),
    resumeOffset: numOrNull(row, "resume_offset"),
    cachedTokens: numOrNull(row, "cached_tokens"),
    cacheWriteTokens: numOrNull(row, "cache_write_tokens"),
    cacheWrite1hTokens: numOrNull(row, "cache_write_1h_tokens"),
    cacheWriteUsd: numOrNull(row, "cache_write_usd"),
    movedFrom: textOrNull(row, "moved_from"),
  };
}
