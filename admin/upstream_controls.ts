/**
 * The operator's controls on one upstream (docs/admin.md "Upstream health"): resume a paused
 * upstream at once, and disable or enable it. Resuming clears its cooldown (stored, so every
 * instance sharing the database adopts it at its next heartbeat); disabling is a config change,
 * validated and stored like any other save.
 */
import { Hono } from "hono";
import { isRecord } from "../gateway/runtime/json.ts";
import type { Cooldowns } from "../gateway/route/cooldown.ts";
import { type ConfigAdminDeps, editedDocument, saveConfig } from "./config_admin.ts";

export interface UpstreamControlDeps extends ConfigAdminDeps {
  cooldowns: Cooldowns;
}

export function upstreamControls(deps: UpstreamControlDeps): Hono {
  const app = new Hono();
  const known = (id: string) => deps.state.config?.upstreams.some((u) => u.id === id) ?? false;
  const notFound = (id: string) => ({
    error: { code: "admin.upstream_not_found", message: `no upstream '${id}' is configured` },
  });
  app.post("/admin/api/upstreams/:id/resume", (c) => {
    const id = c.req.param("id");
    if (!known(id)) return c.json(notFound(id), 404);
    deps.cooldowns.resume(id);
    deps.log?.event("admin.upstream_resumed", { upstream: id });
    return c.json({ ok: true, upstream: id, paused: false });
  });
  for (const [action, enabled] of [["enable", true], ["disable", false]] as const) {
    app.post(`/admin/api/upstreams/:id/${action}`, async (c) => {
      const id = c.req.param("id");
      const stored = await editedDocument(deps);
      const upstreams = isRecord(stored) && Array.isArray(stored.upstreams) ? stored.upstreams : [];
      if (!upstreams.some((u) => isRecord(u) && u.id === id)) return c.json(notFound(id), 404);
      const next = {
        ...(stored as Record<string, unknown>),
        upstreams: upstreams.map((u) => isRecord(u) && u.id === id ? { ...u, enabled } : u),
      };
      const change = await saveConfig(deps, next);
      if (!change.ok) {
        const error = { code: change.code, message: change.message };
        return c.json({ error, problems: change.problems }, change.status);
      }
      deps.log?.event("admin.upstream_" + action + "d", { upstream: id });
      return c.json({ ok: true, upstream: id, enabled });
    });
  }
  return app;
}
