import { type Context, Hono } from "hono";
import { recentAttempts } from "../db/admin_queries.ts";
import type { Db } from "../db/client.ts";
import type { ReadDb } from "../db/read_db.ts";
import type { AbortRegistry } from "../gateway/live/abort_registry.ts";
import type { AccessDeps } from "../gateway/policy/access.ts";
import type { Clock } from "../gateway/runtime/clock.ts";
import { configJsonSchema } from "../gateway/config/json_schema.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import type { Cooldowns } from "../gateway/route/cooldown.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import type { Logger } from "../gateway/runtime/logger.ts";
import type { RunState } from "../gateway/policy/run_state.ts";
import { readJsonBody } from "../gateway/accept/read_body.ts";
import type { Slots } from "../gateway/route/slots.ts";
import type { Pools } from "../gateway/route/pools.ts";
import type { ConfigChecked, SessionInfo } from "./api_types.ts";
import { ADMIN_SCRIPT, ADMIN_STYLE } from "./assets.gen.ts";
import {
  type ConfigAdminDeps,
  type ConfigChange,
  configView,
  patchConfig,
  repairConfig,
  RepairRequestSchema,
  saveConfig,
} from "./config_admin.ts";
import { configVersionsApi } from "./config_versions_api.ts";
import { adminGuard, requireJson } from "./guard.ts";
import {
  HEALTH_SAMPLE_LIMIT,
  HEALTH_WINDOW_MS,
  type HealthInputs,
  healthView,
  mcpReplicas,
} from "./health.ts";
import type { McpState } from "../gateway/mcp/mcp_state.ts";
import type { Config } from "../gateway/config/schema.ts";
import { historyPage, type LiveRecord, parseHistoryQuery, requestDetail } from "./history_api.ts";
import { databaseErrorHandler } from "./database_errors.ts";
import { memoryHistoryPage, memoryRequestDetail, type MemoryRows } from "./memory_history.ts";
import { liveApi } from "./live_api.ts";
import { LiveFleet } from "./live_fleet.ts";
import type { Metrics } from "../gateway/runtime/metrics.ts";
import { renderAdminPage } from "./page.tsx";
import { trendsApi } from "./trends_api.ts";
import { sessionsApi } from "./sessions_api.ts";
import type { SessionLimits } from "../gateway/policy/session_limits.ts";
import { upstreamControls } from "./upstream_controls.ts";
import { fencesApi } from "./fences_api.ts";
import type { Fences } from "../gateway/live/fences.ts";

export interface AdminDeps extends AccessDeps {
  state: RunState;
  demo: boolean;
  registry: AbortRegistry;
  cooldowns: Cooldowns;
  slots: Slots;
  /** Pools' shares for the health view (docs/admin.md "Health"). */
  pools?: Pools;
  db: Db;
  /**
   * Where the page's reads of history run: for a local file a reader thread of their own, each
   * read bounded (docs/scaling.md "Admin reads"); default `db`, on this thread.
   */
  reads?: ReadDb;
  clock: Clock;
  instanceId: string;
  log?: Logger;
  /** Why history is not reaching the database (none on this platform, or away); null when it is. */
  historyNotice?: () => string | null;
  /**
   * Why history is not being recorded right now: the notice above, or the database's writes
   * failing (docs/deploy.md "Readiness"); null while rows land. The page and health say it.
   */
  historyProblem?: () => string | null;
  /** The history rows held in memory while the database is not there; null once it is. */
  memoryHistory?: () => MemoryRows | null;
  /** More JSON APIs under /admin/api/, behind the same guard (e.g. docs/observability.md observability). */
  apis?: Hono[];
  /** Session budgets, for the Sessions panel's counts (docs/admin.md "Sessions"). */
  sessionLimits?: SessionLimits;
  /** The fences operators' aborts left (docs/admin.md "Fences"). */
  fences?: Fences;
  /** The tool servers' replicas, shown in the health view like upstreams (docs/mcp.md). */
  mcp?: McpState;
  /** How the live list asks the other instances for their requests (docs/scaling.md). */
  fetch?: typeof fetch;
  metrics?: Metrics;
  /** `PULSEGATE_PEER_SECRET` and `PULSEGATE_PUBLIC_URL`: without both the list is this process's. */
  peerSecret?: string;
  publicUrl?: string;
}

/** Config documents are small; anything near this is a mistake, not a config. */
const CONFIG_BODY_LIMIT = 1024 * 1024;

const ASSETS = new Map([
  [ADMIN_SCRIPT.name, { body: ADMIN_SCRIPT.body, type: "text/javascript; charset=utf-8" }],
  [ADMIN_STYLE.name, { body: ADMIN_STYLE.body, type: "text/css; charset=utf-8" }],
]);

// The page loads only its own script and stylesheet and may not be framed (its buttons abort
// requests), so an injected script or a clickjacking frame has nothing to work with.
const PAGE_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
};

/** The admin page, its embedded assets and its JSON API under /admin/api/ (admin token). */
export function adminRoutes(deps: AdminDeps): Hono {
  const app = new Hono();
  const page = renderAdminPage({
    demo: deps.demo,
    assets: { script: ADMIN_SCRIPT.name, style: ADMIN_STYLE.name },
  });
  // The page itself carries no data, so it loads without a token and asks for one.
  app.get("/admin", (c) => {
    const historyNotice = (deps.historyProblem ?? deps.historyNotice)?.() ?? null;
    const html = historyNotice === null ? page : renderAdminPage({
      demo: deps.demo,
      assets: { script: ADMIN_SCRIPT.name, style: ADMIN_STYLE.name },
      historyNotice,
    });
    return c.html(html, 200, { ...PAGE_HEADERS, "cache-control": "no-cache" });
  });
  app.get("/admin/assets/:name", (c) => {
    const asset = ASSETS.get(c.req.param("name"));
    if (!asset) return c.notFound();
    return c.body(asset.body, 200, {
      "content-type": asset.type,
      "cache-control": "public, max-age=31536000, immutable",
      "x-content-type-options": "nosniff",
    });
  });
  app.onError(
    databaseErrorHandler({ notice: () => deps.historyNotice?.() ?? null, log: deps.log }),
  );
  app.use("/admin/api/*", adminGuard(deps));
  app.use("/admin/api/*", requireJson());
  app.get("/admin/api/session", (c) => c.json(sessionInfo(deps)));
  mountLive(app, deps);
  mountHistory(app, deps);
  app.get("/admin/api/health", async (c) => {
    const now = deps.clock.now();
    const upstreams = [
      ...deps.state.config?.upstreams.map((u) => u.id) ?? [],
      ...(deps.mcp ? mcpReplicas(deps.state.config).map((r) => r.label) : []),
    ];
    const recent = await recentAttempts(deps.reads ?? deps.db, {
      upstreams,
      since: now - HEALTH_WINDOW_MS,
      limit: HEALTH_SAMPLE_LIMIT,
    });
    return c.json(healthView({
      config: deps.state.config,
      now,
      demo: deps.demo,
      inFlight: (id) => deps.slots.inFlight(id),
      cooldown: (id) => deps.cooldowns.get(id),
      phase: (id) => deps.cooldowns.phase(id),
      pools: deps.pools && deps.state.config ? deps.pools.view(deps.state.config) : [],
      recent,
      history: deps.historyProblem?.() ?? null,
      mcp: mcpHealth(deps.mcp, deps.state.config),
    }));
  });
  mountConfig(app, deps);
  app.route("/", upstreamControls({ ...deps, now: () => deps.clock.now() }));
  app.route("/", configVersionsApi({ ...deps, now: () => deps.clock.now() }));
  app.route(
    "/",
    trendsApi({
      db: deps.reads ?? deps.db,
      now: () => deps.clock.now(),
      config: () => deps.state.config,
    }),
  );
  app.route(
    "/",
    sessionsApi({
      db: deps.reads ?? deps.db,
      now: () => deps.clock.now(),
      config: () => deps.state.config,
      running: () => deps.registry.all().map((r) => r.record),
      sessionLimits: deps.sessionLimits,
    }),
  );
  if (deps.fences) {
    app.route("/", fencesApi({ fences: deps.fences, now: () => deps.clock.now() }));
  }
  for (const api of deps.apis ?? []) app.route("/", api);
  return app;
}

function sessionInfo(deps: AdminDeps): SessionInfo {
  return {
    tokenRequired: Boolean(deps.adminToken),
    demo: deps.demo,
    safeMode: deps.state.config === null && deps.state.safeModeReason !== null,
    instanceId: deps.instanceId,
  };
}

function mountLive(app: Hono, deps: AdminDeps): void {
  const fleet = new LiveFleet({
    db: deps.db,
    instanceId: deps.instanceId,
    clock: deps.clock,
    fetch: deps.fetch ?? fetch,
    log: deps.log,
    metrics: deps.metrics,
    peerSecret: deps.peerSecret,
    publicUrl: deps.publicUrl,
  });
  app.route(
    "/",
    liveApi({
      registry: deps.registry,
      clock: deps.clock,
      instanceId: deps.instanceId,
      config: () => deps.state.config,
      stopping: () => deps.state.shuttingDown,
      fleet,
      peerSecret: deps.peerSecret,
      log: deps.log,
    }),
  );
}

function mountHistory(app: Hono, deps: AdminDeps): void {
  const live: LiveRecord = (id) => deps.registry.get(id)?.record;
  app.get("/admin/api/requests", async (c) => {
    const query = parseHistoryQuery(new URL(c.req.url).searchParams);
    if (!query.ok) {
      return apiError(c, { status: 400, code: "admin.bad_query", message: query.message });
    }
    const memory = deps.memoryHistory?.() ?? null;
    const config = deps.state.config;
    if (memory) return c.json(memoryHistoryPage(memory, { query: query.options, live, config }));
    return c.json(
      await historyPage(deps.reads ?? deps.db, { query: query.options, live, config }),
    );
  });
  app.get("/admin/api/requests/:id", async (c) => {
    const memory = deps.memoryHistory?.() ?? null;
    const id = c.req.param("id");
    const detail = memory
      ? memoryRequestDetail(memory, { id, live })
      : await requestDetail(deps.reads ?? deps.db, { id, live });
    if (detail) return c.json(detail);
    return apiError(c, {
      status: 404,
      code: "admin.request_not_found",
      message: "no request with this id is recorded (yet)",
    });
  });
}

function mountConfig(app: Hono, deps: AdminDeps): void {
  const configDeps: ConfigAdminDeps = { ...deps, now: () => deps.clock.now() };
  app.get("/admin/api/config/schema", (c) => c.json(configJsonSchema()));
  app.get("/admin/api/config", async (c) => c.json(await configView(configDeps)));
  app.put(
    "/admin/api/config",
    (c) => withBody(c, async (body) => answer(c, await saveConfig(configDeps, body))),
  );
  app.patch(
    "/admin/api/config",
    (c) => withBody(c, async (body) => answer(c, await patchConfig(configDeps, body))),
  );
  // A dry run: the problems the document has, nothing stored.
  app.post("/admin/api/config/validate", (c) =>
    withBody(c, (body) => {
      const checked = validateConfig(body);
      const result: ConfigChecked = checked.ok
        ? { ok: true, problems: [] }
        : { ok: false, problems: checked.problems };
      return Promise.resolve(c.json(result));
    }));
  app.post("/admin/api/config/repair", (c) =>
    withBody(c, async (body) => {
      const request = RepairRequestSchema.safeParse(body);
      if (request.success) return answer(c, await repairConfig(configDeps, request.data));
      return apiError(c, {
        status: 400,
        code: "admin.bad_repair",
        message: 'send {"actions": [...]} as offered by GET /admin/api/config, or {}',
      });
    }));
}

/** Reads the JSON body (1 MiB at most) and hands it on; a bad body is answered 400 or 413. */
async function withBody(
  c: Context,
  handle: (body: unknown) => Promise<Response>,
): Promise<Response> {
  let body: unknown;
  try {
    body = await readJsonBody(c.req.raw, { limit: CONFIG_BODY_LIMIT, signal: c.req.raw.signal });
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    const status = err.status === 413 ? 413 : 400;
    return apiError(c, { status, code: err.code, message: err.message });
  }
  return await handle(body);
}

function answer(c: Context, change: ConfigChange): Response {
  if (change.ok) return c.json(change.saved);
  return c.json(
    { error: { code: change.code, message: change.message }, problems: change.problems },
    change.status,
  );
}

function apiError(
  c: Context,
  opts: { status: 400 | 404 | 413; code: string; message: string },
): Response {
  return c.json({ error: { code: opts.code, message: opts.message } }, opts.status);
}

/** The health view's reads of the tool servers' replicas: their server's cooldowns, by label. */
function mcpHealth(mcp: McpState | undefined, config: Config | null): HealthInputs["mcp"] {
  if (!mcp || !config) return undefined;
  const serverOf = (label: string) => {
    const id = label.slice(0, label.lastIndexOf("#"));
    return config.mcp_servers.find((s) => s.id === id);
  };
  const cooldowns = (label: string) => {
    const server = serverOf(label);
    return server ? mcp.cooldowns(server) : undefined;
  };
  return {
    inFlight: (label) => mcp.inFlight(label),
    cooldown: (label) =>
      cooldowns(label)?.get(label) ?? {
        upstream: label,
        model: null,
        consecutiveFailures: 0,
        pauseCount: 0,
        pausedUntil: null,
        reason: null,
        probeUntil: null,
        updatedAt: 0,
      },
    phase: (label) => cooldowns(label)?.phase(label) ?? "ok",
  };
}
