import type { AdminDeps } from "../../admin/routes.ts";
import type { KeyUsageMeter } from "../policy/key_usage_meter.ts";
import type { SessionLimits } from "../policy/session_limits.ts";
import type { Fences } from "../live/fences.ts";
import { KeyRefusalBudget } from "../policy/key_refusal_budget.ts";
import { RefusedBudget } from "../policy/refused_budget.ts";
import { requestExists } from "../../db/history_queries.ts";
import type { RunState } from "../policy/run_state.ts";
import { serveDemoUpstream } from "../demo/demo.ts";
import { UPSTREAM_ADAPTERS } from "../formats/formats.ts";
import type { ControlDeps } from "../endpoints/control.ts";
import { AbortRegistry } from "../live/abort_registry.ts";
import type { Exporter } from "../observability/exporter.ts";
import { exportingSink } from "../observability/export_sink.ts";
import { Affinity } from "../route/affinity.ts";
import { InteractionHomes } from "../route/interaction_homes.ts";
import { ContinuationOwners } from "../route/continuation_owners.ts";
import type { Cooldowns } from "../route/cooldown.ts";
import { Slots } from "../route/slots.ts";
import type { Pools } from "../route/pools.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Metrics } from "../runtime/metrics.ts";
import type { ServerDeps } from "./server.ts";
import type { Settings } from "./settings.ts";
import { historyAtRisk, historyProblem } from "./history_health.ts";
import type { History } from "./open_history.ts";
import { McpState } from "../mcp/mcp_state.ts";

export interface ServerParts {
  settings: Settings;
  env: (name: string) => string | undefined;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  state: RunState;
  history: History;
  cooldowns: Cooldowns;
  /** Each pool's measurements and shares (docs/design.md "Pools"). */
  pools: Pools;
  fetch: typeof fetch;
  exporter: Exporter;
  metricsOpen: boolean;
  /** Counts each key's requests, tokens and cost for its limits (docs/config.md). */
  keyMeter: KeyUsageMeter;
  /** Each key's session budgets and loop breakers (docs/config.md "Session limits"). */
  sessionLimits?: SessionLimits;
  /** What operators' aborts fenced (docs/design.md "Abort and disconnect"). */
  fences?: Fences;
  demo: boolean;
  /** More admin JSON APIs (e.g. observability). */
  adminApis: AdminDeps["apis"];
}

/** Everything the routes need, from the parts opened at start. */
export function serverDeps(parts: ServerParts): ServerDeps {
  const { clock, history, state } = parts;
  const { db, writer, instanceId } = history;
  const control: ControlDeps = {
    clock,
    adapters: UPSTREAM_ADAPTERS,
    cooldowns: parts.cooldowns,
    slots: new Slots(clock),
    affinity: new Affinity(undefined, { clock }),
    homes: new InteractionHomes({ db, clock, log: parts.log }),
    owners: new ContinuationOwners({ db, clock, log: parts.log }),
    pools: parts.pools,
    metrics: parts.metrics,
    log: parts.log,
    env: parts.env,
    fetch: parts.fetch,
    state,
    registry: new AbortRegistry(),
    sink: exportingSink(writer, parts.exporter),
    instanceId,
    pending: new Set(),
    keyMeter: parts.keyMeter,
    sessionLimits: parts.sessionLimits,
    fences: parts.fences,
    // The queue first: a request that just ended may not have reached the database yet. A
    // database that cannot answer does not refuse the request; the upsert still keeps a closed row.
    requestIdTaken: async (id) =>
      writer.holdsRequest(id) || await requestExists(db, id).catch(() => false),
    refusedBudget: new RefusedBudget(clock),
    keyRefusals: new KeyRefusalBudget(clock),
    adminToken: parts.settings.adminToken,
    peerSecret: parts.settings.peerSecret,
    publicUrl: parts.settings.publicUrl,
    db,
    metricsOpen: parts.metricsOpen && state.loopback,
  };
  const mcp = new McpState({
    clock,
    fetch: parts.fetch,
    log: parts.log,
    config: () => state.config,
  });
  parts.metrics.mcpSessions = () => mcp.sessions.size;
  parts.metrics.mcpReplicas = () => mcp.replicaStates();
  return {
    ...control,
    mcp,
    admin: {
      ...adminDeps(control, { demo: parts.demo, apis: parts.adminApis }),
      mcp,
      reads: history.reads,
      historyNotice: () => history.readiness.describe(),
      historyProblem: () => historyProblem(history),
      memoryHistory: () => history.readiness.ready ? null : writer.queuedRows(),
    },
    demo: parts.demo
      ? (request, caller) =>
        serveDemoUpstream(request, { clock, caller, self: parts.settings.host })
      : null,
    ready: () => {
      const serving: Readiness = state.shuttingDown
        ? { ok: false, reason: "shutting down" }
        : state.config
        ? { ok: true }
        : { ok: false, reason: `safe mode: ${state.safeModeReason}` };
      // docs/deploy.md "Readiness": serving goes on while history cannot be recorded, so the
      // status (what a load balancer reads) stays 200; the body says that all is not well.
      const atRisk = historyAtRisk(history);
      if (atRisk === null) return serving;
      if (!serving.ok) return { ...serving, history: atRisk };
      return { ok: false, serving: true, reason: historyProblem(history)!, history: atRisk };
    },
  };
}

/** The admin routes see the very objects the proxy uses: one registry, one set of slots. */
function adminDeps(
  deps: ControlDeps,
  opts: { demo: boolean; apis: AdminDeps["apis"] },
): AdminDeps {
  return {
    adminToken: deps.adminToken,
    loopback: deps.state.loopback,
    state: deps.state,
    demo: opts.demo,
    registry: deps.registry,
    cooldowns: deps.cooldowns,
    slots: deps.slots,
    pools: deps.pools,
    db: deps.db,
    clock: deps.clock,
    instanceId: deps.instanceId,
    log: deps.log,
    apis: opts.apis,
    sessionLimits: deps.sessionLimits,
    fences: deps.fences,
    fetch: deps.fetch,
    metrics: deps.metrics,
    peerSecret: deps.peerSecret,
    publicUrl: deps.publicUrl,
  };
}

/** The /readyz body: `serving` is what its status says, when `ok` alone would not. */
interface Readiness {
  ok: boolean;
  serving?: boolean;
  reason?: string;
  history?: string;
}
