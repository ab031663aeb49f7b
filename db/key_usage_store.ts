import type { InStatement, Row } from "@libsql/client";
import { type Db, writing } from "./client.ts";
import { num, text } from "./row_values.ts";

/**
 * Per-key usage counters behind key limits (docs/scaling.md "Shared through libSQL"): one row per key
 * and second (requests and billed tokens, for rpm and tpm) and one per key and UTC day (cost,
 * for budgets). Rows only grow by upserted increments, so instances sharing the database add
 * up without coordinating.
 */
export type UsageKind = "second" | "day";

export interface KeyUsageRow {
  kind: UsageKind;
  /** Epoch ms where the second or the UTC day begins. */
  start: number;
  requests: number;
  tokens: number;
  costUsd: number;
}

export interface KeyUsageIncrement extends KeyUsageRow {
  keyId: string;
}

const ADD = `INSERT INTO key_usage (key_id, kind, start, requests, tokens, cost_usd)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (key_id, kind, start) DO UPDATE SET
    requests = requests + excluded.requests,
    tokens = tokens + excluded.tokens,
    cost_usd = cost_usd + excluded.cost_usd`;

// Seconds of the sliding minute, and the days of the current UTC month (at most 31 rows).
const READ = `SELECT key_id, kind, start, requests, tokens, cost_usd FROM key_usage
  WHERE key_id = ? AND ((kind = 'second' AND start > ?) OR (kind = 'day' AND start >= ?))`;

const PRUNE = "DELETE FROM key_usage WHERE kind = 'second' AND start < ?";

/** The statements that add the increments, for one write transaction. */
export function addKeyUsageStatements(increments: readonly KeyUsageIncrement[]): InStatement[] {
  return increments.map((i) => ({
    sql: ADD,
    args: [i.keyId, i.kind, i.start, i.requests, i.tokens, i.costUsd],
  }));
}

/** Adds the increments in one write transaction. */
export async function addKeyUsage(db: Db, increments: readonly KeyUsageIncrement[]) {
  if (!increments.length) return;
  await writing(db, (client) => client.batch(addKeyUsageStatements(increments), "write"));
}

/** Each key's second rows after `secondsAfter` and day rows from `daysFrom` (epoch ms). */
export async function readKeyUsage(
  db: Db,
  opts: { keyIds: readonly string[]; secondsAfter: number; daysFrom: number },
): Promise<Map<string, KeyUsageRow[]>> {
  const out = new Map<string, KeyUsageRow[]>(opts.keyIds.map((id) => [id, []]));
  if (!opts.keyIds.length) return out;
  const results = await db.client.batch(
    opts.keyIds.map((id) => ({ sql: READ, args: [id, opts.secondsAfter, opts.daysFrom] })),
    "read",
  );
  for (const result of results) {
    for (const row of result.rows) {
      out.get(text(row, "key_id"))?.push({
        kind: text(row, "kind") === "day" ? "day" : "second",
        start: num(row, "start"),
        requests: amount(row, "requests"),
        tokens: amount(row, "tokens"),
        costUsd: amount(row, "cost_usd"),
      });
    }
  }
  return out;
}

/**
 * A stored amount, finite and 0 or more: a credit or an Infinity stored before counts were
 * checked must neither lift nor end a budget for good (docs/security.md "Numbers an upstream
 * reports").
 */
function amount(row: Row, column: string): number {
  const value = num(row, column);
  return Number.isFinite(value) && value > 0 ? value : 0;
}

/** Drops second rows older than `before`; day rows stay (one per key and day). */
export function pruneKeySecondsStatement(before: number): InStatement {
  return { sql: PRUNE, args: [before] };
}

export async function pruneKeySeconds(db: Db, before: number): Promise<void> {
  await writing(db, (client) => client.execute(pruneKeySecondsStatement(before)));
}
