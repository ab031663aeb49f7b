import { type Db, localFilePath, openDatabase } from "../../db/client.ts";
import { type BatchExecutor, inProcessExecutor, workerExecutor } from "../../db/batch_executor.ts";
import { HistoryWriter } from "../../db/history_writer.ts";
import { registerInstance } from "../../db/instances.ts";
import { migrate } from "../../db/migrate.ts";
import { autoVacuumAtStart } from "../../db/auto_vacuum.ts";
import { closeRowsOfDeadInstances } from "./instance_heartbeat.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { isPathError, SettingPathError } from "./setting_paths.ts";
import { DB_THREAD_NICE, type Settings } from "./settings.ts";
import type { Closers } from "./closers.ts";
import { DatabaseReadiness } from "./database_readiness.ts";
import { unavailableDatabase } from "../../db/unavailable_client.ts";
import type { ReadDb } from "../../db/read_db.ts";
import { type WorkerReads, workerReads } from "../../db/worker_reads.ts";

/** How long a running request's row waits in memory before it is written as open. */
export const OPEN_ROW_DEFER_MS = 1_000;

/** Rows kept in memory while the database is away (or absent); the oldest go beyond it. */
export const HISTORY_MEMORY_ROWS = 100_000;

export interface History {
  db: Db;
  writer: HistoryWriter;
  /** This process, as the owner of the rows it writes (docs/scaling.md). */
  instanceId: string;
  /** Whether the database is prepared; history waits in memory until it is. */
  readiness: DatabaseReadiness;
  /**
   * Where the writer's batches run (a worker thread for a local file), waiting for readiness;
   * the key usage meter's writes run there too.
   */
  executor: BatchExecutor;
  /**
   * Where the admin page's reads run (docs/scaling.md "Admin reads"): for a local file a reader
   * thread of their own, each read bounded; for a remote server its async client.
   */
  reads: ReadDb;
}

/**
 * The database, migrated, with this instance registered and the rows of dead instances closed,
 * and the history writer over it. Each thing opened is handed to `closers` at once, so a later
 * failure (here or further on in the start) closes it.
 */
export async function openHistory(
  settings: Settings,
  opts: {
    clock: Clock;
    log: Logger;
    closers: Closers;
    onHistoryBatch?: (batch: { ms: number; rows: number }) => void;
    /** Rows kept in memory while the database is away; default HISTORY_MEMORY_ROWS (tests lower it). */
    memoryRows?: number;
    /** Told how many rows the writer dropped (the queue full, or abandoned at shutdown). */
    onDropped?: (rows: number) => void;
    /** Where a local file's batches run: a worker thread (default), or this one. */
    thread?: "worker" | "this";
    env: (name: string) => string | undefined;
  },
): Promise<History> {
  const { clock, log, closers } = opts;
  const { db, absent } = await openOrStandIn(settings, { log, env: opts.env });
  closers.add("database", () => db.close());
  const instanceId = newInstanceId();
  const readiness = new DatabaseReadiness(async () => {
    await migrate(db);
    if (db.client.protocol === "file") await turnOnAutoVacuum(db, log);
    await registerInstance(db, instanceId, { now: clock.now() });
    const closed = await closeRowsOfDeadInstances(db, { instanceId, clock });
    if (closed) log.event("history.interrupted_rows_closed", { rows: closed });
  }, { clock, log, absent });
  // A local file that cannot be prepared is the operator's to fix: the start fails. A remote
  // database may be away for a while: the gateway serves and keeps the rows until it is back.
  if (!(await readiness.ensure()) && db.client.protocol === "file") throw readiness.failure;
  // A local file's writes run synchronously in the driver: keep them off the serving thread.
  const executor = gated(
    readiness,
    db.client.protocol === "file" && opts.thread !== "this"
      ? workerExecutor(settings.dbUrl, {
        nice: settings.dbThreadNice ?? DB_THREAD_NICE,
        onWarning: (warning) => log.event("history.worker_priority_unchanged", { warning }),
        fallback: inProcessExecutor(db),
        onFallback: (err) => log.event("history.worker_unavailable", { error: String(err) }),
      })
      : inProcessExecutor(db),
  );
  closers.add("history executor", () => executor.close());
  const reads = adminReads(db, { settings, log, thread: opts.thread });
  if ("close" in reads) closers.add("admin reader", () => reads.close());
  const writer = new HistoryWriter(db, {
    executor,
    // Most requests end within a second: their open and closed rows then merge into one write.
    deferOpenMs: OPEN_ROW_DEFER_MS,
    clock,
    onBatch: opts.onHistoryBatch,
    onError: (err) => {
      if (readiness.ready) log.event("history.write_failed", { error: String(err) });
    },
    onDropped: opts.onDropped,
    maxPending: opts.memoryRows ?? HISTORY_MEMORY_ROWS,
  });
  closers.add("history writer", async () => {
    if (!await writer.close()) {
      // The database is away (or absent) and will not see these rows: say how many, once.
      log.event("history.rows_lost_at_shutdown", { rows: writer.abandon() });
    }
  });
  return { db, writer, instanceId, readiness, executor, reads };
}

/**
 * A local file's admin reads run on a reader thread, where the driver's synchronous statements
 * cannot hold the serving thread, stopped at the bound (db/worker_reads.ts). Where no worker
 * can start they fall back to this thread, as history writes do. A remote server's client waits
 * on the network, so its reads stay here.
 */
function adminReads(
  db: Db,
  opts: { settings: Settings; log: Logger; thread?: "worker" | "this" },
): ReadDb | WorkerReads {
  if (db.client.protocol !== "file" || opts.thread === "this") return db.client;
  return workerReads(opts.settings.dbUrl, {
    boundMs: opts.settings.adminQueryTimeoutMs,
    nice: opts.settings.dbThreadNice ?? DB_THREAD_NICE,
    onWarning: (warning) => opts.log.event("admin.reader_priority_unchanged", { warning }),
    fallback: db.client,
    onFallback: (err) => opts.log.event("admin.reader_unavailable", { error: String(err) }),
    onReplaced: () => opts.log.event("admin.reader_replaced", {}),
  });
}

/** Batches wait (in the writer's queue, retried with its backoff) until the database is ready. */
export function gated(readiness: DatabaseReadiness, executor: BatchExecutor): BatchExecutor {
  return {
    run: async (statements) => {
      if (!(await readiness.ensure())) {
        throw new Error(readiness.describe() ?? "history database not ready");
      }
      return await executor.run(statements);
    },
    close: () => executor.close(),
  };
}

/**
 * The database the settings name. On a platform without FFI (Deno Deploy), with no
 * PULSEGATE_DB_URL set, the default local file cannot be opened: the gateway then runs without a
 * database, loudly, rather than not at all (docs/deploy.md). A database the operator named, and
 * any other failure, still fail the start with one line naming the setting.
 */
async function openOrStandIn(
  settings: Settings,
  opts: { log: Logger; env: (name: string) => string | undefined },
): Promise<{ db: Db; absent?: string }> {
  const path = localFilePath(settings.dbUrl);
  if (path !== null && opts.env("PULSEGATE_DB_URL") === undefined && !ffiGranted()) {
    const why = "this runtime cannot load the local libSQL driver (no FFI) and PULSEGATE_DB_URL " +
      `is not set; history is kept in memory only (at most ${HISTORY_MEMORY_ROWS} rows) and ` +
      "is lost on restart";
    opts.log.event("history.no_database", { reason: why });
    return { db: unavailableDatabase(settings.dbUrl, why), absent: why };
  }
  try {
    return { db: await openDatabase(settings.dbUrl, { authToken: settings.dbAuthToken }) };
  } catch (err) {
    if (path !== null && isPathError(err)) {
      throw new SettingPathError("PULSEGATE_DB_URL", path, err);
    }
    throw err;
  }
}

function ffiGranted(): boolean {
  try {
    return Deno.permissions.querySync({ name: "ffi" }).state === "granted";
  } catch {
    return false; // a runtime without the permissions API has no FFI either
  }
}

/**
 * A file made before auto_vacuum was set on new files gets it when small enough to rewrite now;
 * a larger one is left to the operator (docs/scaling.md "Retention"), said once per start. A
 * failure (another process holds the file) only costs the shrinking, never the start.
 */
async function turnOnAutoVacuum(db: Db, log: Logger): Promise<void> {
  try {
    const result = await autoVacuumAtStart(db);
    if (result.done === "vacuumed") {
      log.event("history.auto_vacuum_on", { bytes: result.bytes, ms: Math.round(result.ms) });
    } else if (result.done === "left") {
      log.event("history.auto_vacuum_off", {
        reason: result.reason,
        fix: 'stop the gateway and run one VACUUM (docs/scaling.md "Retention")',
      });
    }
  } catch (err) {
    log.event("history.auto_vacuum_failed", { error: String(err) });
  }
}

/**
 * This process's id: 64 random bits in 16 hex digits. Every request row carries it, so it is kept
 * short: a UUID's 36 characters cost 20 bytes more per request on disk (docs/scaling.md "Bytes
 * per request"). Two processes sharing a database draw the same one with odds of 2^-64.
 */
export function newInstanceId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
