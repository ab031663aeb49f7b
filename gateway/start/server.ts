import { type Context, Hono } from "hono";
import { type AdminDeps, adminRoutes } from "../../admin/routes.ts";
import { type ControlDeps, controlRoutes } from "../endpoints/control.ts";
import { listModels } from "../endpoints/model_list.ts";
import { serveModelPath } from "../endpoints/model_paths.ts";
import { installFallbacks, refuseOtherMethods } from "../endpoints/not_found.ts";
import { originCheck } from "../accept/origin_check.ts";
import { badHostResponse } from "../accept/host_header.ts";
import { type InteractionAction, serveInteraction } from "../endpoints/interaction_paths.ts";
import { directProxy, PROXY_ROUTES } from "./proxy_routes.ts";
import { serveMcp } from "../mcp/mcp_endpoint.ts";
import type { McpState } from "../mcp/mcp_state.ts";

export interface ServerDeps extends ControlDeps {
  admin: AdminDeps;
  /** The demo's simulated upstreams; `caller` is the peer address the request came from. */
  demo: ((request: Request, caller: Deno.NetAddr | undefined) => Promise<Response | null>) | null;
  /**
   * /readyz: `ok` when all is well; `serving` when this instance can serve though something is
   * not (history not being recorded), which keeps it in a load balancer (docs/deploy.md).
   */
  ready: () => { ok: boolean; serving?: boolean; reason?: string };
  /** PULSEGATE_PUBLIC_URL, an origin besides the Host's own that the admin page may use. */
  publicUrl?: string;
  /** The MCP sessions, tool server cooldowns and hints of /mcp (docs/mcp.md). */
  mcp: McpState;
}

/**
 * What Deno.serve runs: the Host header is checked before the app, whose router reads its path
 * out of the URL the runtime built from that header (`gateway/accept/host_header.ts`).
 */
export function createHandler(deps: ServerDeps): Deno.ServeHandler {
  const app = createApp(deps);
  const direct = directProxy(deps);
  return (request, info) => badHostResponse(request) ?? direct(request) ?? app.fetch(request, info);
}

/** All routes of the one process: proxy, control, metrics, admin, health. */
export function createApp(deps: ServerDeps): Hono {
  const app = new Hono();
  installFallbacks(app, { log: deps.log });
  app.use(originCheck(deps));
  // `createHandler` serves these POSTs by `directProxy` before the router; the app keeps them so
  // that it is whole on its own, and so that the 405 below is for the other methods only.
  for (const [path, route] of PROXY_ROUTES) app.post(path, (c) => route(c.req.raw, deps));
  refuseOtherMethods(app, {
    paths: [
      "/v1/chat/completions",
      "/v1/responses",
      "/v1/messages",
      "/v1/messages/count_tokens",
      "/v1/embeddings",
    ],
    allow: ["POST"],
  });
  // Google's SDK calls /v1beta by default and /v1 when asked; both are served.
  app.get("/v1/models", (c) => listModels(c.req.raw, deps));
  app.get("/v1beta/models", (c) => listModels(c.req.raw, deps));
  refuseOtherMethods(app, { paths: ["/v1/models", "/v1beta/models"], allow: ["GET", "HEAD"] });
  app.all("/v1/models/*", (c) => serveModelPath(c.req.raw, deps));
  app.all("/v1beta/models/*", (c) => serveModelPath(c.req.raw, deps));
  // Google's Interactions API (docs/interactions.md), under both versions as the models are.
  for (const version of ["/v1beta", "/v1"]) {
    const at = `${version}/interactions`;
    const act = (action: InteractionAction) => (c: Context) =>
      serveInteraction(c.req.raw, { id: c.req.param("id") ?? "", action, deps });
    app.get(`${at}/:id`, act("get"));
    app.delete(`${at}/:id`, act("delete"));
    app.post(`${at}/:id/cancel`, act("cancel"));
    refuseOtherMethods(app, { paths: [at, `${at}/:id/cancel`], allow: ["POST"] });
    refuseOtherMethods(app, { paths: [`${at}/:id`], allow: ["GET", "DELETE"] });
  }
  // Tool servers (docs/mcp.md): one endpoint, Streamable HTTP.
  app.on(["GET", "POST", "DELETE"], "/mcp", (c) => serveMcp(c.req.raw, deps));
  refuseOtherMethods(app, { paths: ["/mcp"], allow: ["GET", "POST", "DELETE"] });
  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/readyz", (c) => {
    const ready = deps.ready();
    return c.json(ready, ready.ok || ready.serving ? 200 : 503);
  });
  app.route("/", controlRoutes(deps));
  app.route("/", adminRoutes(deps.admin));
  if (deps.demo) {
    const demo = deps.demo;
    // Deno.serve hands Hono its connection info as the env.
    app.all("/_demo/*", async (c) => (await demo(c.req.raw, peerOf(c.env))) ?? c.notFound());
  }
  return app;
}

function peerOf(info: unknown): Deno.NetAddr | undefined {
  const addr = (info as Partial<Deno.ServeHandlerInfo> | undefined)?.remoteAddr;
  return addr?.transport === "tcp" ? addr : undefined;
}
