import type { Db } from "../../db/client.ts";
import { loadStoredConfig, storeConfig } from "../../db/config_store.ts";
import type { Config } from "../config/schema.ts";
import { formatProblems, validateConfig } from "../config/validate.ts";
import type { Logger } from "../runtime/logger.ts";
import { isPathError, SettingPathError } from "./setting_paths.ts";
import type { Settings } from "./settings.ts";

/** A config file that cannot be read as JSON or fails validation: the start is refused. */
export class ConfigFileError extends Error {}

export interface LoadedConfig {
  config: Config | null;
  safeModeReason: string | null;
  demo: boolean;
  /** Version of the stored config (docs/scaling.md); null when nothing is stored. */
  configVersion: number | null;
  /** A config file that runs but could not be stored yet: the database is away. */
  unstored?: unknown;
}

/**
 * A config file is validated and stored, then the stored config runs. A stored config that fails
 * validation starts safe mode; no config at all starts the demo profile (docs/design.md).
 */
export async function loadConfig(
  db: Db,
  opts: {
    settings: Settings;
    configFile?: unknown;
    readFile?: (path: string) => Promise<string>;
    log: Logger;
    now: number;
    /** "away": a database that may come back; "absent": none on this platform. */
    database?: "ready" | "away" | "absent";
  },
): Promise<LoadedConfig> {
  const database = opts.database ?? "ready";
  const { log, settings } = opts;
  let file = opts.configFile;
  if (file === undefined && settings.configPath) {
    const read = opts.readFile ?? Deno.readTextFile;
    const path = settings.configPath;
    const text = await read(path).catch((err) => {
      throw isPathError(err) ? new SettingPathError("PULSEGATE_CONFIG", path, err) : err;
    });
    try {
      file = JSON.parse(text);
    } catch (err) {
      throw new ConfigFileError(
        `${settings.configPath} is not valid JSON: ${(err as Error).message}`,
      );
    }
  }
  if (file !== undefined) {
    const checked = validateConfig(file);
    if (!checked.ok) {
      throw new ConfigFileError(`config is invalid:\n${formatProblems(checked.problems)}`);
    }
    if (database !== "ready") {
      return {
        config: checked.config,
        safeModeReason: null,
        demo: false,
        configVersion: null,
        unstored: file,
      };
    }
    const configVersion = await storeConfig(db, file, { now: opts.now, by: "file" });
    return { config: checked.config, safeModeReason: null, demo: false, configVersion };
  }
  if (database === "absent") {
    return { config: null, safeModeReason: null, demo: true, configVersion: null };
  }
  if (database === "away") {
    // Not the demo: real clients may be pointed here, and the stored config is only unknown.
    const safeModeReason = "the database is unreachable, so the stored config is not known yet; " +
      "it runs as soon as the database answers (or start with PULSEGATE_CONFIG)";
    return { config: null, safeModeReason, demo: false, configVersion: null };
  }
  const stored = await loadStoredConfig(db);
  if (!stored) return { config: null, safeModeReason: null, demo: true, configVersion: null };
  return { ...checkStored(stored.body, { log }), demo: false, configVersion: stored.version };
}

/** A stored document as it runs: the config, or safe mode with the reason it cannot run. */
export function checkStored(
  body: unknown,
  opts: { log: Logger },
): { config: Config | null; safeModeReason: string | null } {
  const checked = validateConfig(body);
  if (checked.ok) return { config: checked.config, safeModeReason: null };
  opts.log.event("gateway.safe_mode", { problems: checked.problems });
  return { config: null, safeModeReason: formatProblems(checked.problems) };
}
