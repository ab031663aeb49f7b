import { type Db, localFilePath, openDatabase } from "../db/client.ts";
import { isPathError, SettingPathError } from "./setting_paths.ts";
import { loadStoredConfig, storeConfig } from "../db/config_store.ts";
import { loadCooldowns, saveCooldown } from "../db/cooldown_store.ts";
import { inProcessExecutor, workerExecutor } from "../db/batch_executor.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { requestExists } from "../db/history_queries.ts";
import { registerInstance } from "../db/instances.ts";
import { closeRowsOfDeadInstances, startHeartbeat } from "./live/instance_heartbeat.ts";
import { migrate } from "../db/migrate.ts";
import { observabilityApi } from "../admin/observability_api.ts";
import { costsApi } from "../admin/costs_api.ts";
import { KeyUsageMeter } from "./accept/key_usage_meter.ts";
import { Exporter } from "./observability/exporter.ts";
import { exportingSink } from "./observability/export_sink.ts";
import { ObservabilityState } from "./observability/observability_state.ts";
import { AbortRegistry } from "./live/abort_registry.ts";
import { Affinity } from "./route/affinity.ts";
import { type Clock, createClock } from "./runtime/clock.ts";
import type { Config } from "./config/schema.ts";
import { formatProblems, validateConfig } from "./config/validate.ts";
import { Cooldowns } from "./route/cooldown.ts";
import { demoConfig, serveDemoUpstream } from "./demo/demo.ts";
import { UPSTREAM_ADAPTERS } from "./formats/formats.ts";
import { createLogger, type Logger } from "./runtime/logger.ts";
import { Metrics } from "./runtime/metrics.ts";
import type { RunState } from "./accept/proxy.ts";
import { createApp, type ServerDeps } from "./server.ts";
import { isLoopback, type Settings } from "./settings.ts";
import { Slots } from "./route/slots.ts";
import { forwardingOn } from "./live/abort_forwarding.ts";
import { RefusedBudget } from "./accept/refused_budget.ts";
import { shuttingDown } from "./forward/stop_reasons.ts";
import { GuardrailMatcher } from "./accept/guardrail_matcher.ts";

/** Upstream connections idle this long are not reused. */
const UPSTREAM_POOL_IDLE_MS = 4_000;

/** How long a running request's row waits in memory before it is written as open. */
const OPEN_ROW_DEFER_MS = 1_000;

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
}

export interface Gateway {
  url: string;
  port: number;
  db: Db;
  writer: HistoryWriter;
  metrics: Metrics;
  registry: AbortRegistry;
  cooldowns: Cooldowns;
  slots: Slots;
  clock: Clock;
  state: RunState;
  instanceId: string;
  log: Logger;
  /** Stops accepting, lets requests finish (up to the grace period), flushes history. */
  shutdown(): Promise<void>;
}

export class ConfigFileError extends Error {}

/** A database path the operator cannot use becomes one line naming PULSEGATE_DB_URL. */
async function openSettingDatabase(settings: Settings): Promise<Db> {
  try {
    return await openDatabase(settings.dbUrl, { authToken: settings.dbAuthToken });
  } catch (err) {
    const path = localFilePath(settings.dbUrl);
    if (path !== null && isPathError(err)) {
      throw new SettingPathError("PULSEGATE_DB_URL", path, err);
    }
    throw err;
  }
}

export async function startGateway(opts: StartOptions): Promise<Gateway> {
  const { settings } = opts;
  const clock = createClock(settings.timeScale);
  const log = createLogger({ quiet: opts.quiet });
  const db = await openSettingDatabase(settings);
  await migrate(db);
  const instanceId = crypto.randomUUID();
  await registerInstance(db, instanceId, { now: clock.now() });
  const closed = await closeRowsOfDeadInstances(db, { instanceId, clock });
  if (closed) log.event("history.interrupted_rows_closed", { rows: closed });
  const metrics = new Metrics();
  // A local file's writes run synchronously in the driver: keep them off the serving thread.
  const executor = db.client.protocol === "file"
    ? workerExecutor(settings.dbUrl, {
      authToken: settings.dbAuthToken,
      fallback: inProcessExecutor(db),
      onFallback: (err) => log.event("history.worker_unavailable", { error: String(err) }),
    })
    : inProcessExecutor(db);
  const writer = new HistoryWriter(db, {
    executor,
    // Most requests end within a second: their open and closed rows then merge into one write.
    deferOpenMs: OPEN_ROW_DEFER_MS * clock.scale,
    now: () => clock.now(),
    onBatch: opts.onHistoryBatch,
    after: (ms, fn) => clock.after(ms, fn),
    onError: (err) => log.event("history.write_failed", { error: String(err) }),
    onDropped: (rows) => metrics.historyDropped.inc({}, rows),
  });
  // Pooled connections idle longer than a server's keep-alive timeout (Node's is 5 s) may be
  // closed under us; reusing one fails the next call with "connection reset". Drop them sooner.
  const httpClient = Deno.createHttpClient({ poolIdleTimeout: UPSTREAM_POOL_IDLE_MS });
  const upstreamFetch: typeof fetch = opts.fetch ??
    ((input, init) => fetch(input, { ...init, client: httpClient }));
  const exporter = new Exporter({ clock, env: opts.env, fetch: upstreamFetch, log });
  const observability = new ObservabilityState({ db, clock, exporter, log });
  await observability.load();
  const loaded = await loadConfig({ ...opts, db, log, now: clock.now() });
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
  const cooldowns = new Cooldowns(clock, {
    policy: () => {
      const f = state.config?.failover;
      return {
        failuresToPause: f?.failures_to_pause ?? 3,
        pauseSecs: f?.pause_secs ?? 60,
        maxPauseSecs: f?.max_pause_secs ?? 600,
      };
    },
    save: (row) =>
      void saveCooldown(db, row).catch((err) =>
        log.event("cooldown.save_failed", { error: String(err) })
      ),
  });
  cooldowns.load(await loadCooldowns(db));
  metrics.cooldown = () =>
    (state.config?.upstreams ?? []).map((u) => ({
      upstream: u.id,
      paused: cooldowns.isPaused(u.id),
    }));
  const registry = new AbortRegistry();
  const slots = new Slots(clock);
  const pending = new Set<Promise<void>>();
  const keyMeter = new KeyUsageMeter({ db, clock, log });
  const demo = loaded.demo;
  const deps: ServerDeps = {
    clock,
    adapters: UPSTREAM_ADAPTERS,
    cooldowns,
    slots,
    affinity: new Affinity(),
    metrics,
    log,
    env: opts.env,
    fetch: upstreamFetch,
    state,
    registry,
    sink: exportingSink(writer, exporter),
    instanceId,
    pending,
    keyMeter,
    // The queue first: a request that just ended may not have reached the database yet. A
    // database that cannot answer does not refuse the request; the upsert still keeps a closed row.
    requestIdTaken: async (id) =>
      writer.holdsRequest(id) || await requestExists(db, id).catch(() => false),
    refusedBudget: new RefusedBudget(clock),
    adminToken: settings.adminToken,
    peerSecret: settings.peerSecret,
    publicUrl: settings.publicUrl,
    db,
    metricsOpen: (opts.metricsOpen ?? settings.metricsOpen) && loopback,
    admin: {
      adminToken: settings.adminToken,
      loopback,
      state,
      demo,
      registry,
      cooldowns,
      slots,
      db,
      clock,
      instanceId,
      log,
      apis: [observabilityApi(observability), costsApi({ db, clock, state, meter: keyMeter })],
    },
    demo: demo
      ? (request, caller) => serveDemoUpstream(request, { clock, caller, self: settings.host })
      : null,
    ready: () =>
      state.shuttingDown
        ? { ok: false, reason: "shutting down" }
        : state.config
        ? { ok: true }
        : { ok: false, reason: `safe mode: ${state.safeModeReason}` },
  };
  const app = createApp(deps);
  const server = Deno.serve({
    hostname: settings.host,
    port: settings.port,
    onListen: () => {},
  }, app.fetch);
  const port = server.addr.port;
  const host = settings.host.includes(":") ? `[${settings.host}]` : settings.host;
  const url = `http://${host}:${port}`;
  if (demo) {
    const checked = validateConfig(demoConfig(url));
    if (!checked.ok) throw new Error(`demo config is invalid: ${formatProblems(checked.problems)}`);
    state.config = checked.config;
    log.event("gateway.demo_profile", {
      note: "no config given: serving the built-in demo route 'demo' with SIMULATED upstreams",
    });
  }
  // Only an instance the others can sign for may be sent aborts (docs/scaling.md).
  const reachAt = forwardingOn(settings) ? settings.publicUrl : undefined;
  await registerInstance(db, instanceId, { now: clock.now(), url: reachAt });
  const stopHeartbeat = startHeartbeat(db, {
    instanceId,
    clock,
    log,
    // Other instances pause upstreams too (docs/scaling.md): their view wins at each beat.
    onBeat: async () => cooldowns.load(await loadCooldowns(db)),
  });
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
      const drained = Promise.all([...pending]).then(() => "drained" as const);
      const serverDone = server.shutdown();
      if ((await Promise.race([drained, grace])) === "late") {
        registry.abort(registry.all(), shuttingDown);
        await Promise.all([...pending]);
      }
      graceOver.abort();
      await serverDone;
      stopHeartbeat();
      await keyMeter.flush();
      if (!await writer.close()) {
        // The database is away and will not see these rows: say how many, once.
        log.event("history.rows_lost_at_shutdown", { rows: writer.abandon() });
      }
      await exporter.close();
      state.guardrailMatcher.close();
      httpClient.close();
      await executor.close();
      db.close();
      log.event("gateway.stopped", {});
    })();
  return {
    url,
    port,
    db,
    writer,
    metrics,
    registry,
    cooldowns,
    slots,
    clock,
    state,
    instanceId,
    log,
    shutdown,
  };
}

interface LoadedConfig {
  config: Config | null;
  safeModeReason: string | null;
  demo: boolean;
}

/**
 * docs/design.md "Settings" and "Config": a config file is validated and stored, then the stored config
 * runs. A stored config that fails validation starts safe mode; no config at
 * all starts the demo profile.
 */
async function loadConfig(
  opts: StartOptions & { db: Db; log: Logger; now: number },
): Promise<LoadedConfig> {
  const { db, log, settings } = opts;
  let file = opts.configFile;
  if (file === undefined && settings.configPath) {
    const read = opts.readFile ?? Deno.readTextFile;
    const path = settings.configPath;
    const text = await read(path).catch((err) => {
      throw isPathError(err) ? new SettingPathError("PULSEGATE_CONFIG", path, err) : err;
    });
    try {
      file = JSON.parse(text);
    } catch (err) {
      throw new ConfigFileError(
        `${settings.configPath} is not valid JSON: ${(err as Error).message}`,
      );
    }
  }
  if (file !== undefined) {
    const checked = validateConfig(file);
    if (!checked.ok) {
      throw new ConfigFileError(`config is invalid:\n${formatProblems(checked.problems)}`);
    }
    await storeConfig(db, file, { now: opts.now, by: "file" });
    return { config: checked.config, safeModeReason: null, demo: false };
  }
  const stored = await loadStoredConfig(db);
  if (!stored) return { config: null, safeModeReason: null, demo: true };
  const checked = validateConfig(stored.body);
  if (checked.ok) return { config: checked.config, safeModeReason: null, demo: false };
  const reason = formatProblems(checked.problems);
  log.event("gateway.safe_mode", { problems: checked.problems });
  return { config: null, safeModeReason: reason, demo: false };
}
