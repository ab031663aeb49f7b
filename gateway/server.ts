import { Hono } from "hono";
import { type AdminDeps, adminRoutes } from "../admin/routes.ts";
import { type ControlDeps, controlRoutes } from "./control.ts";
import { CLIENT_CODECS } from "./formats.ts";
import { handleProxy } from "./proxy.ts";

export interface ServerDeps extends ControlDeps {
  admin: AdminDeps;
  demo: ((request: Request) => Promise<Response | null>) | null;
  ready: () => { ok: boolean; reason?: string };
}

/** All routes of the one process: proxy, control, metrics, admin, health. */
export function createApp(deps: ServerDeps): Hono {
  const app = new Hono();
  app.post(
    "/v1/chat/completions",
    (c) => handleProxy(c.req.raw, { codec: CLIENT_CODECS.chat, ctx: {}, deps }),
  );
  app.post(
    "/v1/responses",
    (c) => handleProxy(c.req.raw, { codec: CLIENT_CODECS.responses, ctx: {}, deps }),
  );
  app.get("/v1/models", (c) => {
    const routes = deps.state.config?.routes.filter((r) => r.enabled) ?? [];
    return c.json({
      object: "list",
      data: routes.map((r) => ({
        id: r.model,
        object: "model",
        type: "model",
        display_name: r.model,
        created: 0,
        created_at: new Date(0).toISOString(),
        owned_by: "pulsegate",
      })),
      has_more: false,
    });
  });
  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/readyz", (c) => {
    const ready = deps.ready();
    return c.json(ready, ready.ok ? 200 : 503);
  });
  app.route("/", controlRoutes(deps));
  app.route("/", adminRoutes(deps.admin));
  if (deps.demo) {
    const demo = deps.demo;
    app.all("/_demo/*", async (c) => (await demo(c.req.raw)) ?? c.notFound());
  }
  return app;
}
