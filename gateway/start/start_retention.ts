import { HistoryPruner } from "../../db/history_pruner.ts";
import type { RollupTable } from "../../db/history_retention.ts";
import { ROLLUP_BUCKETS_MS, ROLLUP_TABLE_NAMES } from "../../db/rollups.ts";
import { DEFAULT_HISTORY } from "../config/history_schema.ts";
import type { Exporter } from "../observability/exporter.ts";
import type { RunState } from "../policy/run_state.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Closers } from "./closers.ts";
import type { History } from "./open_history.ts";

/**
 * The rollups, each bucket size of each table, kept `history.rollup_retention_days`
 * (docs/scaling.md "Rollups"): their key leads with the size, then the bucket's start.
 */
export const ROLLUP_TABLES: readonly RollupTable[] = ROLLUP_TABLE_NAMES.flatMap((table) =>
  ROLLUP_BUCKETS_MS.map((ms) => ({
    table,
    minuteColumn: "bucket_start",
    bucket: { column: "bucket_ms", ms },
  }))
);

/**
 * History retention (docs/scaling.md "Retention"), run between the history writer's batches at
 * start and every minute, with the window of the config running then. Closed before the writer,
 * so its last step ends before the last rows are flushed.
 */
export function startRetention(
  history: History,
  opts: { state: RunState; exporter: Exporter; clock: Clock; log: Logger; closers: Closers },
): HistoryPruner {
  const { state, exporter, clock, log } = opts;
  const pruner = new HistoryPruner(history.db, {
    writer: history.writer,
    clock: { now: () => clock.now(), after: (ms, fn) => clock.after(ms, fn) },
    policy: () => {
      const history = state.config?.history ?? DEFAULT_HISTORY;
      return {
        retentionDays: history.retention_days,
        rollupRetentionDays: history.rollup_retention_days,
      };
    },
    holdFrom: () => exporter.oldestQueuedStart(),
    rollups: ROLLUP_TABLES,
    vacuum: history.db.client.protocol === "file",
    onError: (err) => {
      if (history.readiness.ready) log.event("history.prune_failed", { error: String(err) });
    },
  });
  pruner.start();
  opts.closers.add("history retention", () => pruner.close());
  return pruner;
}
