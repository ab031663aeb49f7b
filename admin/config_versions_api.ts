/**
 * The kept config versions (docs/admin.md "Config versions"): list them, read one, and roll
 * back to one, which stores it again as the newest version after validating it like any save.
 */
import { Hono } from "hono";
import { getConfigVersion, listConfigVersions } from "../db/config_versions.ts";
import { type ConfigAdminDeps, saveConfig } from "./config_admin.ts";
import type { ConfigVersionList } from "./config_versions_types.ts";

/** How many versions the list shows; older ones stay stored. */
export const CONFIG_VERSIONS_SHOWN = 50;

export function configVersionsApi(deps: ConfigAdminDeps): Hono {
  const app = new Hono();
  const notFound = (id: string) => ({
    error: { code: "admin.config_version_not_found", message: `no config version ${id} is kept` },
  });
  const versionId = (raw: string) => /^\d{1,15}$/.test(raw) ? Number(raw) : null;
  app.get("/admin/api/config/versions", async (c) => {
    const list: ConfigVersionList = {
      versions: await listConfigVersions(deps.reads ?? deps.db, { limit: CONFIG_VERSIONS_SHOWN }),
    };
    return c.json(list);
  });
  app.get("/admin/api/config/versions/:id", async (c) => {
    const id = versionId(c.req.param("id"));
    const version = id === null ? null : await getConfigVersion(deps.reads ?? deps.db, id);
    return version ? c.json(version) : c.json(notFound(c.req.param("id")), 404);
  });
  app.post("/admin/api/config/versions/:id/rollback", async (c) => {
    const id = versionId(c.req.param("id"));
    const version = id === null ? null : await getConfigVersion(deps.db, id);
    if (!version || id === null) return c.json(notFound(c.req.param("id")), 404);
    const change = await saveConfig(deps, version.body, { restoredFrom: id });
    if (!change.ok) {
      const error = { code: change.code, message: `version ${id}: ${change.message}` };
      return c.json({ error, problems: change.problems }, change.status);
    }
    deps.log?.event("config.rolled_back", { version: id });
    return c.json(change.saved);
  });
  return app;
}
