import type { InValue } from "@libsql/client";
import { type Db, openDatabase } from "../db/client.ts";
import { migrate } from "../db/migrate.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";

export interface TempDb {
  db: Db;
  url: string;
  dir: string;
}

/** A migrated file database in a fresh temp dir, closed and removed after `fn`. */
export async function withTempDb(fn: (temp: TempDb) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate_db_" });
  const url = `file:${dir}/nested/pulsegate.db`;
  const db = await openDatabase(url);
  try {
    await migrate(db);
    await fn({ db, url, dir });
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
}

export function requestRecord(overrides: Partial<RequestRecord> = {}): RequestRecord {
  return {
    id: "req-1",
    instanceId: "inst-a",
    state: "open",
    startedAt: 1_000,
    endedAt: null,
    clientFormat: "openai-chat",
    route: "smart",
    stream: true,
    keyId: "app1",
    sessionId: null,
    status: null,
    outcome: null,
    failureSource: null,
    errorCode: null,
    errorMessage: null,
    upstream: null,
    upstreamModel: null,
    firstContentMs: null,
    durationMs: null,
    inputTokens: null,
    outputTokens: null,
    cachedTokens: null,
    reasoningTokens: null,
    tokensEstimated: false,
    usageSource: null,
    costUsd: null,
    cacheWriteTokens: null,
    cacheWrite1hTokens: null,
    cacheWriteUsd: null,
    movedFrom: null,
    toolServer: null,
    bytesIn: null,
    bytesOut: null,
    ...overrides,
  };
}

export function attemptRecord(overrides: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    requestId: "req-1",
    hop: 1,
    upstream: "claude",
    model: "claude-sonnet-4-5",
    outcome: null,
    status: null,
    errorCode: null,
    errorMessage: null,
    startedAt: 1_010,
    headersMs: null,
    firstContentMs: null,
    durationMs: null,
    inputTokens: null,
    outputTokens: null,
    tokensEstimated: false,
    usageSource: null,
    droppedHeaders: null,
    costUsd: null,
    resumeOffset: null,
    cachedTokens: null,
    cacheWriteTokens: null,
    cacheWrite1hTokens: null,
    cacheWriteUsd: null,
    movedFrom: null,
    ...overrides,
  };
}

/** Timer hooks that never fire on their own, so a test decides when the writer flushes. */
export const manualTimers = {
  schedule: (_fn: () => void, _ms: number) => 0,
  cancel: (_id: number) => {},
};

/** A second connection holding the write lock, as another process or a long admin query would. */
export async function lockDatabase(url: string) {
  const other = await openDatabase(url);
  const tx = await other.client.transaction("write");
  await tx.execute("INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('lock', 0, 0)");
  return {
    release: async () => {
      await tx.rollback();
      other.close();
    },
  };
}

/**
 * Copies rows read from a current database into `to` as an older release stored them: only the
 * columns `to`'s table has (later migrations add more).
 */
export async function insertAsStored(
  to: Db,
  opts: { table: "requests" | "attempts"; rows: readonly Record<string, unknown>[] },
): Promise<void> {
  const info = await to.client.execute(`PRAGMA table_info(${opts.table})`);
  const had = info.rows.map((r) => String(r.name));
  if (!opts.rows.length) return;
  const columns = had.filter((c) => c in opts.rows[0]!);
  const sql = `INSERT INTO ${opts.table} (${columns.join(", ")}) VALUES (${
    columns.map(() => "?").join(", ")
  })`;
  await to.client.batch(
    opts.rows.map((row) => ({ sql, args: columns.map((c) => (row[c] ?? null) as InValue) })),
    "write",
  );
}
