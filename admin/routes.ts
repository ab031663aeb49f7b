import { Hono } from "hono";
import { configJsonSchema } from "../gateway/config/json_schema.ts";
import { type AccessDeps, requireAdmin } from "../gateway/access.ts";
import type { RunState } from "../gateway/proxy.ts";
import { renderAdminPage } from "./page.tsx";

export interface AdminDeps extends AccessDeps {
  state: RunState;
  demo: boolean;
}

/** The admin page and its JSON API under /admin/api/, all behind the admin token. */
export function adminRoutes(deps: AdminDeps): Hono {
  const app = new Hono();
  // The page itself carries no data, so it loads without a token and asks for one.
  app.get("/admin", (c) => c.html(renderAdminPage({ demo: deps.demo })));
  app.use("/admin/api/*", requireAdmin(deps));
  app.get("/admin/api/config/schema", (c) => c.json(configJsonSchema()));
  app.get(
    "/admin/api/config",
    (c) => c.json({ config: deps.state.config, safe_mode: deps.state.safeModeReason }),
  );
  return app;
}
