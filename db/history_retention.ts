import type { InStatement, ResultSet, Row } from "@libsql/client";
import type { Db } from "./client.ts";
import { num, numOrNull } from "./row_values.ts";

/**
 * The statements of history retention (docs/scaling.md "Retention"). Each step is one write
 * transaction of at most `batch` requests with their attempts, so that a batch of new rows,
 * which waits for at most one step (db/history_writer.ts `upkeep`), never waits long.
 */

export const DAY_MS = 86_400_000;

/**
 * Requests per prune step. Measured on the 2-core bench machine (docs/scaling.md "Retention"), on
 * a file of 1M requests: a step of 500 with their attempts holds the write lock for 2.6-5 ms
 * (median), 1,000 for 4.5-9 ms, 2,000 for 15 ms. 500 a step still removes over 100,000 requests
 * a second.
 */
export const PRUNE_BATCH = 500;

/** Pages per incremental vacuum step: 1 MiB of 4 KiB pages, 1.7 ms measured on that file. */
export const VACUUM_PAGES = 256;

// Oldest first, so a prune cut short (a restart) leaves the kept history one unbroken span.
// `state <> 'open'`: an open row is a request still running (here or on another instance), or
// one of a dead instance not yet closed as interrupted; both keep their rows.
const DUE_REQUESTS = `SELECT id FROM requests
  WHERE started_at < ? AND state <> 'open' ORDER BY started_at, id LIMIT ?`;

/**
 * One step: removes up to `batch` requests that started before `cutoff` (epoch ms) and are not
 * running, with their attempts (every table keyed by a request id: db/migrations.ts). Attempts
 * first: the request rows are what find them. Both statements select the same requests, since
 * nothing else writes between them inside the transaction. The changes of the second statement
 * are the requests removed.
 */
export function pruneRequestsStep(cutoff: number, opts: { batch: number }): InStatement[] {
  const args = [cutoff, opts.batch];
  return [
    { sql: `DELETE FROM attempts WHERE request_id IN (${DUE_REQUESTS})`, args },
    { sql: `DELETE FROM requests WHERE id IN (${DUE_REQUESTS})`, args },
  ];
}

/**
 * Instances whose last heartbeat is older than the window: one row per start of a process, of
 * no use once none of their rows is kept. A live instance beats every few seconds and puts its
 * row back if it was removed (db/instances.ts `heartbeat`).
 */
export function pruneInstances(cutoff: number): InStatement {
  return { sql: "DELETE FROM instances WHERE heartbeat_at < ?", args: [cutoff] };
}

/**
 * A table of per-minute rollups (trends and costs read them): its name, the column holding the
 * minute, and that column's unit in ms (1 for epoch ms, 60,000 for minute numbers).
 */
export interface RollupTable {
  table: string;
  minuteColumn: string;
  unitMs?: number;
  /**
   * For a table holding several bucket sizes (db/rollups.ts): the column naming the size and the
   * size pruned, in ms. A bucket goes once all of it is older than the cutoff, so the day that
   * straddles it stays whole.
   */
  bucket?: { column: string; ms: number };
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

/** Minutes of rollups per step: whole minutes go, so a minute is never half removed. */
export const ROLLUP_MINUTES_PER_STEP = 60;

/**
 * One step of rollup retention: removes the oldest `minutes` distinct minutes older than
 * `cutoff` (epoch ms). Works on any table whose minute column leads an index or its key,
 * rowid or not.
 */
export function pruneRollupStep(
  rollup: RollupTable,
  opts: { cutoff: number; minutes: number },
): InStatement {
  const { table, minuteColumn, bucket } = rollup;
  const names = [table, minuteColumn, ...(bucket ? [bucket.column] : [])];
  if (!names.every((name) => IDENTIFIER.test(name))) {
    throw new Error(`rollup table and columns must be plain names: ${names.join(".")}`);
  }
  const unit = rollup.unitMs ?? 1;
  // Without a size the minute before the cutoff's goes; with one, every bucket ending by it.
  const before = bucket
    ? Math.floor((opts.cutoff - bucket.ms) / unit) + 1
    : Math.floor(opts.cutoff / unit);
  const size = bucket ? ` AND ${bucket.column} = ?` : "";
  const sizeArgs = bucket ? [bucket.ms] : [];
  return {
    sql: `DELETE FROM ${table} WHERE ${minuteColumn} IN (SELECT DISTINCT ${minuteColumn} ` +
      `FROM ${table} WHERE ${minuteColumn} < ?${size} ORDER BY ${minuteColumn} LIMIT ?)${size}`,
    args: [before, ...sizeArgs, opts.minutes, ...sizeArgs],
  };
}

/**
 * One step of session-summary retention (docs/scaling.md "Session summaries"): removes up to
 * `batch` summaries whose last request started before `cutoff` (epoch ms), oldest first, along
 * `session_summaries_last`. A summary goes with the last of its rows, not before.
 */
export function pruneSummariesStep(cutoff: number, opts: { batch: number }): InStatement {
  return {
    sql: `DELETE FROM session_summaries WHERE (key_id, session_id) IN (SELECT key_id, session_id
      FROM session_summaries WHERE last_at < ? ORDER BY last_at LIMIT ?)`,
    args: [cutoff, opts.batch],
  };
}

/** Moves up to `pages` free pages to the end of the file and cuts them off (auto_vacuum=2). */
export function vacuumStep(pages: number): InStatement {
  return `PRAGMA incremental_vacuum(${Math.max(1, Math.floor(pages))})`;
}

/** What the file holds, from reads that cost a few page lookups however large history is. */
export interface HistoryFootprint {
  /** The oldest request kept (epoch ms), null when none is. */
  oldestStartedAt: number | null;
  /**
   * About how many requests are kept: the span of their rowids, which grow by one per new row
   * and are removed oldest first. A COUNT(*) would read every row.
   */
  requestsApprox: number;
  /** The database file's pages in bytes (the WAL aside), and of those the free ones. */
  bytes: number;
  freeBytes: number;
  /** The file's auto_vacuum mode: only `incremental` gives free pages back to the disk. */
  autoVacuum: "none" | "full" | "incremental";
}

const NO_ROW = { length: 0 } as Row;

const AUTO_VACUUM_MODES = ["none", "full", "incremental"] as const;

export async function historyFootprint(db: Db): Promise<HistoryFootprint> {
  const [span, pages, size, free, mode] = await db.client.batch([
    `SELECT (SELECT min(started_at) FROM requests) AS oldest,
      (SELECT max(rowid) FROM requests) AS last_row, (SELECT min(rowid) FROM requests) AS first_row`,
    "PRAGMA page_count",
    "PRAGMA page_size",
    "PRAGMA freelist_count",
    "PRAGMA auto_vacuum",
  ], "read");
  const first = (result: ResultSet | undefined): Row => result?.rows[0] ?? NO_ROW;
  const spanRow = first(span);
  const lastRow = numOrNull(spanRow, "last_row");
  const firstRow = numOrNull(spanRow, "first_row");
  const pageSize = num(first(size), "page_size");
  return {
    oldestStartedAt: numOrNull(spanRow, "oldest"),
    requestsApprox: lastRow === null || firstRow === null ? 0 : lastRow - firstRow + 1,
    bytes: num(first(pages), "page_count") * pageSize,
    freeBytes: num(first(free), "freelist_count") * pageSize,
    autoVacuum: AUTO_VACUUM_MODES[num(first(mode), "auto_vacuum")] ?? "none",
  };
}

/** Free pages of the file now; 0 where the pragma says nothing (a remote server). */
export async function freePages(db: Db): Promise<number> {
  const result = await db.client.execute("PRAGMA freelist_count");
  const row = result.rows[0];
  return row ? num(row, "freelist_count") : 0;
}
