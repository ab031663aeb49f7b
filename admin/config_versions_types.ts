/**
 * The shapes of the config version routes (docs/admin.md "Config versions"), shared by the
 * server and the browser bundle. Type-only.
 */
import type { ConfigVersion, ConfigVersionInfo } from "../db/config_versions.ts";

export type { ConfigVersion, ConfigVersionInfo };

/** GET /admin/api/config/versions: newest first. */
export interface ConfigVersionList {
  versions: ConfigVersionInfo[];
}
