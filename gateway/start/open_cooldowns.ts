import type { Db } from "../../db/client.ts";
import { loadCooldowns, saveCooldown } from "../../db/cooldown_store.ts";
import type { RunState } from "../policy/run_state.ts";
import { Cooldowns } from "../route/cooldown.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

/**
 * Upstream pauses as stored (a pause survives a restart and is shared by instances), under the
 * failover policy of whatever config runs at the moment. Each change is written at once.
 */
export async function openCooldowns(
  db: Db,
  opts: {
    clock: Clock;
    log: Logger;
    state: RunState;
    /** False while the database is away: start with no pauses, read them when it is back. */
    load: boolean;
  },
): Promise<Cooldowns> {
  const { state, log } = opts;
  const cooldowns = new Cooldowns(opts.clock, {
    policy: () => {
      const f = state.config?.failover;
      return {
        failuresToPause: f?.failures_to_pause ?? 3,
        pauseSecs: f?.pause_secs ?? 60,
        maxPauseSecs: f?.max_pause_secs ?? 600,
      };
    },
    save: (row) =>
      void saveCooldown(db, row).catch((err) =>
        log.event("cooldown.save_failed", { error: String(err) })
      ),
  });
  if (opts.load) cooldowns.load(await loadCooldowns(db));
  return cooldowns;
}
