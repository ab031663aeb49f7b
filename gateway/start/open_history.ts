import { type Db, localFilePath, openDatabase } from "../../db/client.ts";
import { inProcessExecutor, workerExecutor } from "../../db/batch_executor.ts";
import { HistoryWriter } from "../../db/history_writer.ts";
import { registerInstance } from "../../db/instances.ts";
import { migrate } from "../../db/migrate.ts";
import { closeRowsOfDeadInstances } from "../live/instance_heartbeat.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { isPathError, SettingPathError } from "../setting_paths.ts";
import type { Settings } from "../settings.ts";
import type { Closers } from "./closers.ts";

/** How long a running request's row waits in memory before it is written as open. */
export const OPEN_ROW_DEFER_MS = 1_000;

export interface History {
  db: Db;
  writer: HistoryWriter;
  /** This process, as the owner of the rows it writes (docs/scaling.md). */
  instanceId: string;
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
  },
): Promise<History> {
  const { clock, log, closers } = opts;
  const db = await openSettingDatabase(settings);
  closers.add("database", () => db.close());
  await migrate(db);
  const instanceId = crypto.randomUUID();
  await registerInstance(db, instanceId, { now: clock.now() });
  const closed = await closeRowsOfDeadInstances(db, { instanceId, clock });
  if (closed) log.event("history.interrupted_rows_closed", { rows: closed });
  // A local file's writes run synchronously in the driver: keep them off the serving thread.
  const executor = db.client.protocol === "file"
    ? workerExecutor(settings.dbUrl, {
      authToken: settings.dbAuthToken,
      fallback: inProcessExecutor(db),
      onFallback: (err) => log.event("history.worker_unavailable", { error: String(err) }),
    })
    : inProcessExecutor(db);
  closers.add("history executor", () => executor.close());
  const writer = new HistoryWriter(db, {
    executor,
    // Most requests end within a second: their open and closed rows then merge into one write.
    deferOpenMs: OPEN_ROW_DEFER_MS * clock.scale,
    now: () => clock.now(),
    onBatch: opts.onHistoryBatch,
    after: (ms, fn) => clock.after(ms, fn),
    onError: (err) => log.event("history.write_failed", { error: String(err) }),
  });
  closers.add("history writer", async () => void await writer.close());
  return { db, writer, instanceId };
}

/** A database path the operator cannot use becomes one line naming PULSEGATE_DB_URL. */
async function openSettingDatabase(settings: Settings): Promise<Db> {
  try {
    return await openDatabase(settings.dbUrl, { authToken: settings.dbAuthToken });
  } catch (err) {
    const path = localFilePath(settings.dbUrl);
    if (path !== null && isPathError(err)) {
      throw new SettingPathError("PULSEGATE_DB_URL", path, err);
    }
    throw err;
  }
}
