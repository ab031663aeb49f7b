import { Hono } from "hono";
import type { Db } from "../db/client.ts";
import type { HistoryPruner } from "../db/history_pruner.ts";
import { historyFootprint } from "../db/history_retention.ts";
import { DEFAULT_HISTORY } from "../gateway/config/history_schema.ts";
import type { RunState } from "../gateway/policy/run_state.ts";
import type { RetentionView } from "./retention_types.ts";

/**
 * What history keeps and from when (docs/admin.md "History"), for the History panel. Every
 * figure is a few page lookups or the pruner's memory, whatever the size of history. Mounted
 * under the admin guard.
 */
export function retentionApi(deps: { db: Db; state: RunState; pruner: HistoryPruner }): Hono {
  const app = new Hono();
  app.get("/admin/api/history/retention", async (c) => {
    const history = deps.state.config?.history ?? DEFAULT_HISTORY;
    const footprint = await historyFootprint(deps.db);
    const status = deps.pruner.status();
    const last = status.last;
    const view: RetentionView = {
      retentionDays: history.retention_days,
      rollupRetentionDays: history.rollup_retention_days,
      ...footprint,
      lastPrune: last && {
        at: last.at,
        requests: last.requests,
        attempts: last.attempts,
        heldFrom: last.heldFrom,
      },
      removedTotal: status.removedTotal,
      lastError: status.lastError,
    };
    return c.json(view);
  });
  return app;
}
