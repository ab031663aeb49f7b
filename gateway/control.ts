import { Hono } from "hono";
import { isAdmin } from "./access.ts";
import { findKey, presentedKey } from "./auth.ts";
import type { LiveRequest } from "./live_request.ts";
import type { ProxyDeps } from "./proxy.ts";
import { abortedByOperator } from "./stop_reasons.ts";

export interface ControlDeps extends ProxyDeps {
  adminToken: string | undefined;
  metricsOpen: boolean;
}

/**
 * SPEC §7 abort endpoints and /metrics. An abort is allowed for the admin
 * token, or for the gateway key that made every request it would stop.
 */
export function controlRoutes(deps: ControlDeps): Hono {
  const app = new Hono();
  const access = () => ({ adminToken: deps.adminToken, loopback: deps.state.loopback });
  const callerKey = (request: Request): string | null => {
    const config = deps.state.config;
    if (!config) return null;
    return findKey(config, { presented: presentedKey(request.headers), env: deps.env })?.id ?? null;
  };
  const abort = (request: Request, list: LiveRequest[], notRunning: string) => {
    if (!isAdmin(request, access())) {
      const key = callerKey(request);
      if (!key) return deny(401, "admin token or gateway key required");
      if (list.some((l) => l.record.keyId !== key)) {
        return deny(403, "this key may abort only its own requests");
      }
    }
    const stopped = deps.registry.abort(list, abortedByOperator);
    if (!stopped.length) {
      return Response.json({ error: { code: notRunning, message: "nothing is running" } }, {
        status: 404,
      });
    }
    return Response.json({ requests: stopped });
  };
  app.post("/request/:id/abort", (c) => {
    const live = deps.registry.get(c.req.param("id"));
    return abort(c.req.raw, live ? [live] : [], "control.request_not_running");
  });
  app.post(
    "/sessions/:id/abort",
    (c) =>
      abort(c.req.raw, deps.registry.inSession(c.req.param("id")), "control.session_not_running"),
  );
  app.get("/metrics", (c) => {
    if (!deps.metricsOpen && !isAdmin(c.req.raw, access())) {
      return deny(401, "admin token required");
    }
    return c.text(deps.metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });
  return app;
}

function deny(status: number, message: string): Response {
  return Response.json({ error: { code: "control.unauthorized", message } }, { status });
}
