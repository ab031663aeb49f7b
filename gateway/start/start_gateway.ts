import type { Db } from "../../db/client.ts";
import { loadCooldowns } from "../../db/cooldown_store.ts";
import type { HistoryWriter } from "../../db/history_writer.ts";
import { registerInstance } from "../../db/instances.ts";
import { startHeartbeat } from "./instance_heartbeat.ts";
import { storeConfig } from "../../db/config_store.ts";
import { syncStoredConfig } from "./config_sync.ts";
import { observabilityApi } from "../../admin/observability_api.ts";
import { costsApi } from "../../admin/costs_api.ts";
import { KeyUsageMeter } from "../policy/key_usage_meter.ts";
import { SessionLimits } from "../policy/session_limits.ts";
import { Fences } from "../live/fences.ts";
import { Exporter } from "../observability/exporter.ts";
import { ObservabilityState } from "../observability/observability_state.ts";
import type { AbortRegistry } from "../live/abort_registry.ts";
import type { McpState } from "../mcp/mcp_state.ts";
import { type Clock, systemClock } from "../runtime/clock.ts";
import { formatProblems, validateConfig } from "../config/validate.ts";
import { cooldownKey, type Cooldowns } from "../route/cooldown.ts";
import { configMembers } from "../config/route_entries.ts";
import { demoConfig } from "../demo/demo.ts";
import { createLogger, type Logger } from "../runtime/logger.ts";
import { Metrics } from "../runtime/metrics.ts";
import type { RunState } from "../policy/run_state.ts";
import { createHandler } from "./server.ts";
import { isLoopback, type Settings } from "./settings.ts";
import type { Slots } from "../route/slots.ts";
import { shuttingDown } from "../forward/stop_reasons.ts";
import { Closers } from "./closers.ts";
import { loadConfig } from "./load_config.ts";
import { openCooldowns } from "./open_cooldowns.ts";
import { Pools } from "../route/pools.ts";
import { openHistory } from "./open_history.ts";
import { serverDeps } from "./server_deps.ts";
import { type ClientServer, serveClients } from "./serve_clients.ts";
import { upstreamFetch } from "./upstream_fetch.ts";
import { forwardingOn } from "../live/abort_forwarding.ts";
import { GuardrailMatcher } from "../policy/guardrail_matcher.ts";
import { startRetention } from "./start_retention.ts";
import { retentionApi } from "../../admin/retention_api.ts";

export { ConfigFileError } from "./load_config.ts";

/** docs/design.md "Settings": how long in-flight requests may finish after SIGTERM. */
export const SHUTDOWN_GRACE_MS = 30_000;

export interface StartOptions {
  settings: Settings;
  env: (name: string) => string | undefined;
  /** Config given directly (tests); otherwise read from `settings.configPath`. */
  configFile?: unknown;
  readFile?: (path: string) => Promise<string>;
  fetch?: typeof fetch;
  quiet?: boolean;
  /** Open /metrics to anyone on loopback (scrapers). */
  metricsOpen?: boolean;
  /** Told about each history batch written (the benchmark measures them). */
  onHistoryBatch?: (batch: { ms: number; rows: number }) => void;
  /** Bound on history rows kept in memory while the database is away; default HISTORY_MEMORY_ROWS. */
  historyMemoryRows?: number;
  /**
   * Where a local file's history batches are written: on a worker thread (the default, as
   * served) or on this thread (suites that start hundreds of gateways in one process, where each
   * worker's own copy of the libSQL driver costs a third of a second; tests/harness.ts).
   */
  historyThread?: "worker" | "this";
  /**
   * Where every wait and every reading of the time comes from (docs/architecture.md "Time"):
   * by default the system clock at `settings.timeScale`; tests pass a virtual clock.
   */
  clock?: Clock;
  /**
   * false: no socket is opened; requests reach the gateway through `Gateway.handler` alone
   * (tests in virtual time, where nothing may wait on the network).
   */
  listen?: boolean;
  /** Uniform in [0, 1) for the pools' picks: Math.random unless a test seeds it. */
  random?: () => number;
}

export interface Gateway {
  url: string;
  /** Every route of the gateway, as the server calls it for each request. */
  handler: Deno.ServeHandler;
  port: number;
  db: Db;
  writer: HistoryWriter;
  metrics: Metrics;
  registry: AbortRegistry;
  cooldowns: Cooldowns;
  slots: Slots;
  pools: Pools;
  /** What operators' aborts fenced (docs/design.md "Abort and disconnect"). */
  fences: Fences;
  /** The MCP sessions and tool server cooldowns of /mcp (docs/mcp.md). */
  mcp: McpState;
  clock: Clock;
  state: RunState;
  instanceId: string;
  log: Logger;
  /**
   * Settles if the server stopped accepting for good: only where plain `Deno.serve` runs
   * (docs/deploy.md "Connection limits"); the process should then shut down and exit non-zero.
   */
  lost: Promise<unknown>;
  /** Stops accepting, lets requests finish (up to the grace period), flushes history. */
  shutdown(): Promise<void>;
}

/**
 * Opens history, cooldowns and the server, in that order. Everything opened is registered with
 * one list of closers, run in reverse on shutdown and also when the start fails part-way, so a
 * refused config or a port in use leaves nothing open behind it.
 */
export async function startGateway(opts: StartOptions): Promise<Gateway> {
  const clock = opts.clock ?? systemClock(opts.settings.timeScale);
  const log = createLogger({ quiet: opts.quiet, clock });
  const closers = new Closers();
  try {
    return await start(opts, { clock, log, closers });
  } catch (err) {
    await closers.closeAll((name, error) =>
      log.event("gateway.close_failed", { part: name, error: String(error) })
    );
    throw err;
  }
}

async function start(
  opts: StartOptions,
  { clock, log, closers }: { clock: Clock; log: Logger; closers: Closers },
): Promise<Gateway> {
  const { settings } = opts;
  // Made first: the history writer counts the rows it drops on it.
  const metrics = new Metrics();
  const history = await openHistory(settings, {
    clock,
    log,
    closers,
    onHistoryBatch: opts.onHistoryBatch,
    memoryRows: opts.historyMemoryRows,
    thread: opts.historyThread,
    onDropped: (rows) => metrics.historyDropped.inc({}, rows),
    env: opts.env,
  });
  const { db, writer, instanceId, readiness } = history;
  const database = readiness.ready ? "ready" : db.client.protocol === "none" ? "absent" : "away";
  const upstream = upstreamFetch(opts.fetch);
  closers.add("upstream http client", upstream.close);
  const exporter = new Exporter({ clock, env: opts.env, fetch: upstream.fetch, log });
  closers.add("exporter", () => exporter.close());
  // Flushed before the history writer closes: the last counts reach the database it still has.
  // Its writes run where history's do, off the serving thread for a local file.
  const keyMeter = new KeyUsageMeter({ db, clock, log, writes: history.executor, metrics });
  closers.add("key usage meter", () => keyMeter.flush());
  const sessionLimits = new SessionLimits({ db, clock, log });
  const fences = new Fences({
    db,
    clock,
    log,
    instanceId,
    metrics,
    settings: () => state.config?.abort,
  });
  const observability = new ObservabilityState({ db, clock, exporter, log });
  if (readiness.ready) await observability.load();
  const loaded = await loadConfig(db, { ...opts, log, now: clock.now(), database });
  const loopback = isLoopback(settings.host);
  const state: RunState = {
    ...loaded,
    loopback,
    shuttingDown: false,
    guardrails: () => observability.guardrails,
    tracing: () => exporter.tracing(),
    guardrailMatcher: new GuardrailMatcher({
      onUnavailable: (err) => log.event("guardrail.worker_unavailable", { error: String(err) }),
    }),
  };
  closers.add("guardrail worker", () => state.guardrailMatcher.close());
  const pruner = startRetention(history, { state, exporter, clock, log, closers });
  const cooldowns = await openCooldowns(db, { clock, log, state, load: readiness.ready });
  metrics.cooldown = () =>
    (state.config?.upstreams ?? []).map((u) => ({
      upstream: u.id,
      paused: cooldowns.isPaused(u.id),
      state: cooldowns.phase(u.id),
    }));
  metrics.memberCooldown = () =>
    (state.config ? configMembers(state.config) : []).map((m) => ({
      ...m,
      state: cooldowns.phase(cooldownKey(m.upstream, m.model)),
    }));
  const pools = new Pools({ random: opts.random ?? Math.random });
  metrics.poolShares = () =>
    state.config === null
      ? []
      : pools.view(state.config).flatMap((pool) =>
        pool.members.map((m) => ({
          route: pool.route,
          pool: pool.index,
          upstream: m.upstream,
          model: m.model,
          share: m.share ?? 0,
        }))
      );
  const deps = serverDeps({
    settings,
    env: opts.env,
    clock,
    log,
    metrics,
    state,
    history,
    cooldowns,
    pools,
    fetch: upstream.fetch,
    exporter,
    metricsOpen: opts.metricsOpen ?? settings.metricsOpen,
    keyMeter,
    sessionLimits,
    fences,
    demo: loaded.demo,
    adminApis: [
      observabilityApi(observability),
      costsApi({ db: history.reads, clock, state, meter: keyMeter }),
      retentionApi({ db, state, pruner }),
    ],
  });
  const handler = createHandler(deps);
  const server = opts.listen === false ? unserved() : serveClients(handler, {
    hostname: settings.host,
    port: settings.port,
    limits: settings.connections,
    log,
    env: opts.env,
  });
  metrics.clientConnections = () => server.connections();
  let serving: Promise<void> | null = null;
  const stopServing = () => serving ??= server.shutdown();
  closers.add("server", stopServing);
  if (server.unguarded) log.event("gateway.connection_limits_off", { reason: server.unguarded });
  const lost = server.lost.then((error) => {
    log.event("gateway.accept_stopped", { error: String(error) });
    return error;
  });
  const port = server.port;
  const host = settings.host.includes(":") ? `[${settings.host}]` : settings.host;
  const url = `http://${host}:${port}`;
  if (loaded.demo) {
    const checked = validateConfig(demoConfig(url));
    if (!checked.ok) throw new Error(`demo config is invalid: ${formatProblems(checked.problems)}`);
    state.config = checked.config;
    log.event("gateway.demo_profile", {
      note: "no config given: serving the built-in demo route 'demo' with SIMULATED upstreams",
    });
  }
  // Only an instance the others can sign for may be sent aborts (docs/scaling.md).
  const reachAt = forwardingOn(settings) ? settings.publicUrl : undefined;
  const announce = () => registerInstance(db, instanceId, { now: clock.now(), url: reachAt });
  // A database away at start: what was skipped above happens when it answers, in this order.
  const catchUp = async () => {
    await announce();
    if (loaded.unstored !== undefined) {
      state.configVersion = await storeConfig(db, loaded.unstored, {
        now: clock.now(),
        by: "file",
      });
      loaded.unstored = undefined;
    }
    await syncStoredConfig(db, { state, log });
    if (state.config === null && state.configVersion === null) {
      state.safeModeReason = "no config is stored: save one through the admin API, or start " +
        "with PULSEGATE_CONFIG";
    }
    await observability.load();
    cooldowns.load(await loadCooldowns(db));
  };
  if (readiness.ready) {
    await announce();
    // Fences made before a restart hold from the first request (docs/design.md "Abort and
    // disconnect"); a database away at start is read by the first reload once it answers.
    await fences.reload().catch((err) => log.event("fence.reload_failed", { error: String(err) }));
  } else readiness.onReady(catchUp);
  closers.add("fence reload", fences.startReloading({ ready: () => readiness.ready }));
  closers.add(
    "heartbeat",
    startHeartbeat(db, {
      instanceId,
      clock,
      log,
      ready: () => readiness.ensure(),
      // Other instances save configs and pause upstreams too (docs/scaling.md): the stored
      // view wins at each beat.
      onBeat: async () => {
        await syncStoredConfig(db, { state, log });
        cooldowns.load(await loadCooldowns(db));
      },
    }),
  );
  log.event("gateway.listening", { url, instance: instanceId, safe_mode: state.safeModeReason });
  let stopping: Promise<void> | null = null;
  const shutdown = () =>
    stopping ??= (async () => {
      state.shuttingDown = true;
      const graceOver = new AbortController();
      const grace = clock.sleep(SHUTDOWN_GRACE_MS, graceOver.signal).then(
        () => "late" as const,
        () => "drained" as const,
      );
      const drained = Promise.all([...deps.pending]).then(() => "drained" as const);
      void stopServing();
      if ((await Promise.race([drained, grace])) === "late") {
        deps.registry.abort(deps.registry.all(), shuttingDown);
        await Promise.all([...deps.pending]);
      }
      // The MCP sessions end with the process: their timers stop, their server sessions get a
      // DELETE (docs/mcp.md "Sessions").
      deps.mcp.close();
      graceOver.abort();
      await closers.closeAll((name, error) =>
        log.event("gateway.close_failed", { part: name, error: String(error) })
      );
      log.event("gateway.stopped", {});
    })();
  return {
    url,
    handler,
    port,
    db,
    writer,
    metrics,
    registry: deps.registry,
    cooldowns,
    slots: deps.slots,
    pools,
    fences,
    mcp: deps.mcp,
    clock,
    state,
    instanceId,
    log,
    lost,
    shutdown,
  };
}

/** What a gateway without a socket has in place of its server: nothing to accept, nothing lost. */
function unserved(): ClientServer {
  return {
    port: 0,
    unguarded: null,
    lost: new Promise(() => {}),
    connections: () => null,
    shutdown: () => Promise.resolve(),
  };
}
