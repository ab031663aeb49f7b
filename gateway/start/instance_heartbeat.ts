import type { Db } from "../../db/client.ts";
import { closeInterruptedRows, heartbeat } from "../../db/instances.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

import { HEARTBEAT_MS, staleAfterMs } from "../live/heartbeat_timing.ts";
export { HEARTBEAT_MS };

/**
 * Keeps this instance marked alive and, on every beat, closes rows left open
 * by instances that stopped beating (a crash here, or another process of a
 * shared database), so no row stays open for ever.
 */
export function startHeartbeat(
  db: Db,
  opts: {
    instanceId: string;
    clock: Clock;
    log: Logger;
    /** Also run on every beat: picking up what other instances changed in the shared database. */
    onBeat?: () => Promise<void>;
    /** Whether the database is prepared (tried again if not); a beat is skipped while false. */
    ready?: () => Promise<boolean>;
  },
): () => void {
  const { clock, log, instanceId } = opts;
  let cancel: () => void = () => {};
  let stopped = false;
  const beat = async () => {
    try {
      // Not prepared yet (or no database at all): the readiness logs that, once, not each beat.
      if (opts.ready && !(await opts.ready())) return;
      await heartbeat(db, instanceId, { now: clock.now() });
      const rows = await closeInterruptedRows(db, {
        instanceId,
        now: clock.now(),
        staleAfterMs: staleAfterMs(clock),
      });
      if (rows) log.event("history.interrupted_rows_closed", { rows });
      await opts.onBeat?.();
    } catch (err) {
      log.event("history.heartbeat_failed", { error: String(err) });
    } finally {
      if (!stopped) cancel = clock.after(HEARTBEAT_MS, beat);
    }
  };
  cancel = clock.after(HEARTBEAT_MS, beat);
  return () => {
    stopped = true;
    cancel();
  };
}

/** The sweep at start, before this instance serves anything. */
export async function closeRowsOfDeadInstances(
  db: Db,
  opts: { instanceId: string; clock: Clock },
): Promise<number> {
  return await closeInterruptedRows(db, {
    instanceId: opts.instanceId,
    now: opts.clock.now(),
    staleAfterMs: staleAfterMs(opts.clock),
  });
}
