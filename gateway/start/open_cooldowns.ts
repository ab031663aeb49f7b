import type { Db } from "../../db/client.ts";
import { claimProbe, loadCooldowns, releaseProbe, saveCooldown } from "../../db/cooldown_store.ts";
import type { RunState } from "../policy/run_state.ts";
import { Cooldowns, type ProbeStore } from "../route/cooldown.ts";
import { type Clock, REAL_TIME } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

/**
 * A database slower than this does not hold the request that would probe: this process's own
 * claim stands (real ms, unscaled: a round trip does not shrink in a scaled test).
 */
const CLAIM_TIMEOUT_MS = 500;

/**
 * Upstream and member pauses as stored (a pause survives a restart and is shared by instances),
 * under the failover policy of whatever config runs at the moment. Each change is written at once.
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
    probes: sharedProbes(db, log),
  });
  if (opts.load) cooldowns.load(await loadCooldowns(db));
  return cooldowns;
}

/**
 * Probes claimed in the shared database (docs/scaling.md "Shared through libSQL"), so one instance of
 * all probes a recovering upstream or member. A database that fails or is slow answers null: the
 * claim is then this process's alone, as the pause was while the database was away.
 */
function sharedProbes(db: Db, log: Logger): ProbeStore {
  return {
    async claim(probe) {
      let cancel = () => {};
      // A bound on the database's real answer time, which no clock's pace changes.
      const late = new Promise<null>((resolve) => {
        cancel = REAL_TIME.after(CLAIM_TIMEOUT_MS, () => resolve(null));
      });
      const claimed = claimProbe(db, probe).then(
        (answer) => answer === "claimed" ? answer : { ...answer },
        (err) => {
          log.event("cooldown.probe_claim_failed", {
            upstream: probe.upstream,
            model: probe.model,
            error: String(err),
          });
          return null;
        },
      );
      try {
        return await Promise.race([claimed, late]);
      } finally {
        cancel();
      }
    },
    release(probe) {
      void releaseProbe(db, probe).catch((err) =>
        log.event("cooldown.save_failed", { error: String(err) })
      );
    },
  };
}
