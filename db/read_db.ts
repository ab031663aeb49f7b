import type { InStatement, Value } from "@libsql/client";
import type { Db } from "./client.ts";

/** A result row by column name: what every query module reads (db/row_values.ts). */
export type ReadRow = Readonly<Record<string, Value>>;

export interface ReadResult {
  rows: readonly ReadRow[];
}

/**
 * What a query module needs to read: one statement at a time. The admin reads take this rather
 * than a `Db`, so the same query code runs on a local file's reader thread
 * (db/worker_reads.ts) and through a remote server's async client (`db.client` is one: a
 * libSQL `Client` has this method). Writes never go through it.
 */
export interface ReadDb {
  execute(statement: InStatement): Promise<ReadResult>;
}

/**
 * A read stopped at its bound (docs/scaling.md "Admin reads"): the query asked for more rows
 * than the bound lets it read. The admin API answers it as `admin.query_too_large`.
 */
export class QueryTooLargeError extends Error {
  constructor(readonly boundMs: number) {
    super(`the query ran past its bound of ${boundMs} ms and was stopped`);
    this.name = "QueryTooLargeError";
  }
}

/** The reader was closed (shutdown): there is nobody left to read for. */
export class ReaderClosedError extends Error {
  constructor() {
    super("the admin reader is closed");
    this.name = "ReaderClosedError";
  }
}

/**
 * What the query modules take: a reader, or a whole database (read through its client, on the
 * thread that calls: request-path lookups, tests).
 */
export type Reads = ReadDb | Db;

export function readerOf(db: Reads): ReadDb {
  return "client" in db ? db.client : db;
}
