import { Hono } from "hono";
import type { ClientRequestContext } from "./format.ts";
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
  app.post(
    "/v1/messages",
    (c) => handleProxy(c.req.raw, { codec: CLIENT_CODECS.anthropic, ctx: {}, deps }),
  );
  // Google's SDK calls /v1beta by default in the docs and /v1 in recent versions; both are served.
  for (const version of ["v1beta", "v1"]) {
    app.post(`/${version}/models/*`, (c) => {
      const ctx = geminiContext(new URL(c.req.url));
      if (!ctx) return c.notFound();
      return handleProxy(c.req.raw, { codec: CLIENT_CODECS.gemini, ctx, deps });
    });
  }
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

/** `/v1beta/models/{model}:generateContent` or `:streamGenerateContent[?alt=sse]`. */
function geminiContext(url: URL): ClientRequestContext | null {
  const match = /^\/v1(?:beta)?\/models\/([^/:]+):(generateContent|streamGenerateContent)$/
    .exec(url.pathname);
  if (!match) return null;
  return {
    pathModel: decodeURIComponent(match[1]!),
    pathStream: match[2] === "streamGenerateContent",
    sse: url.searchParams.get("alt") === "sse",
  };
}
