import type { Db } from "../../db/client.ts";
import { loadStoredConfig, storedConfigVersion } from "../../db/config_store.ts";
import type { RunState } from "../policy/run_state.ts";
import type { Logger } from "../runtime/logger.ts";
import { checkStored } from "./load_config.ts";

/**
 * Brings the stored config into force here when another instance sharing the database saved a
 * newer one (docs/scaling.md). Run at each heartbeat: one small read while nothing changed.
 * Only a higher version replaces the running one, so a save made here while this read was under
 * way is never rolled back to the document read before it.
 */
export async function syncStoredConfig(
  db: Db,
  opts: { state: RunState; log: Logger },
): Promise<boolean> {
  const { state, log } = opts;
  const newer = (version: number | null) =>
    version !== null && (state.configVersion === null || version > state.configVersion);
  if (!newer(await storedConfigVersion(db))) return false;
  const stored = await loadStoredConfig(db);
  if (!stored || !newer(stored.version)) return false;
  const { config, safeModeReason } = checkStored(stored.body, { log });
  state.config = config;
  state.safeModeReason = safeModeReason;
  state.configVersion = stored.version;
  log.event("config.reloaded", {
    version: stored.version,
    safe_mode: safeModeReason !== null,
    upstreams: config?.upstreams.length ?? 0,
    routes: config?.routes.length ?? 0,
  });
  return true;
}
