import type { AttemptSample } from "../db/admin_queries.ts";
import type { Config } from "../gateway/config/schema.ts";
import type { McpServer } from "../gateway/config/mcp_schema.ts";
import { configMembers } from "../gateway/config/route_entries.ts";
import { cooldownKey, type CooldownPhase, type CooldownState } from "../gateway/route/cooldown.ts";
import type { PoolView } from "../gateway/route/pools.ts";
import type {
  HealthView,
  MemberHealth,
  RecentAttempts,
  UpstreamHealth,
  UpstreamPoolShare,
} from "./api_types.ts";

/** How far back the recent failure counts and latencies look, in real milliseconds. */
export const HEALTH_WINDOW_MS = 15 * 60_000;
/** At most this many attempts per upstream are read for them, whatever the traffic. */
export const HEALTH_SAMPLE_LIMIT = 500;

export interface HealthInputs {
  config: Config | null;
  now: number;
  demo: boolean;
  inFlight: (upstream: string) => number;
  /** A level's cooldown by its key (gateway/route/cooldown.ts `cooldownKey`). */
  cooldown: (key: string) => CooldownState;
  /** ok, paused or probing; from `cooldown` alone when not given. */
  phase?: (key: string) => CooldownPhase;
  /** The config's pools with their shares in this process. */
  pools?: PoolView[];
  recent: Map<string, AttemptSample[]>;
  /** Why history is not being recorded right now; null when it is. */
  history?: string | null;
  /** Each tool server replica's calls in progress and cooldown (docs/mcp.md). */
  mcp?: {
    inFlight: (replica: string) => number;
    cooldown: (replica: string) => CooldownState;
    phase: (replica: string) => CooldownPhase;
  };
}

/**
 * Each replica of each tool server (`<id>#<n>`, docs/mcp.md), in config order: the labels the
 * health view lists and reads recent attempts for.
 */
export function mcpReplicas(config: Config | null): { label: string; server: McpServer }[] {
  return (config?.mcp_servers ?? []).flatMap((server) =>
    [server.url, ...(server.replicas ?? [])].map((_, i) => ({
      label: `${server.id}#${i + 1}`,
      server,
    }))
  );
}

/**
 * Every configured upstream with its slots, cooldown and recent attempts, in config order, and
 * each of its members (a model the routes send it) with its own cooldown, attempts and pool
 * shares (docs/admin.md "Upstream health").
 */
export function healthView(inputs: HealthInputs): HealthView {
  const models = modelsByUpstream(inputs.config);
  const upstreams = (inputs.config?.upstreams ?? []).map((u): UpstreamHealth => {
    const samples = inputs.recent.get(u.id) ?? [];
    const members = (models.get(u.id) ?? []).map((model): MemberHealth => ({
      model,
      ...cooldownOf(cooldownKey(u.id, model), inputs),
      recent: summarise(samples.filter((s) => s.model === model)),
      pools: poolShares(inputs.pools ?? [], { upstream: u.id, model }),
    }));
    return {
      id: u.id,
      kind: u.kind,
      enabled: u.enabled,
      inFlight: inputs.inFlight(u.id),
      maxInFlight: u.max_in_flight,
      ...cooldownOf(u.id, inputs),
      recent: summarise(samples),
      members,
    };
  });
  // A tool server's replicas shown as upstreams are (kind "mcp"): the same slots, cooldown and
  // recent attempts, no members.
  const mcp = inputs.mcp;
  const replicas = mcp
    ? mcpReplicas(inputs.config).map(({ label, server }): UpstreamHealth => ({
      id: label,
      kind: "mcp",
      enabled: server.enabled,
      inFlight: mcp.inFlight(label),
      maxInFlight: server.max_in_flight,
      ...cooldownOf(label, { cooldown: mcp.cooldown, phase: mcp.phase, now: inputs.now }),
      recent: summarise(inputs.recent.get(label) ?? []),
      members: [],
    }))
    : [];
  return {
    at: inputs.now,
    demo: inputs.demo,
    upstreams: [...upstreams, ...replicas],
    history: inputs.history ?? null,
  };
}

/** One level's cooldown as the API shows it. */
function cooldownOf(
  key: string,
  inputs: Pick<HealthInputs, "cooldown" | "phase" | "now">,
): Pick<
  MemberHealth,
  "state" | "paused" | "pausedUntil" | "pauseReason" | "consecutiveFailures" | "pauseCount"
> {
  const cooldown = inputs.cooldown(key);
  const paused = cooldown.pausedUntil !== null && cooldown.pausedUntil > inputs.now;
  return {
    state: inputs.phase?.(key) ??
      (paused ? "paused" : cooldown.pausedUntil === null ? "ok" : "probing"),
    paused,
    pausedUntil: paused ? cooldown.pausedUntil : null,
    pauseReason: paused ? cooldown.reason : null,
    consecutiveFailures: cooldown.consecutiveFailures,
    pauseCount: cooldown.pauseCount,
  };
}

/** The models the config's routes send each upstream, each once, in config order. */
function modelsByUpstream(config: Config | null): Map<string, string[]> {
  const models = new Map<string, string[]>();
  for (const m of config ? configMembers(config) : []) {
    models.set(m.upstream, [...models.get(m.upstream) ?? [], m.model]);
  }
  return models;
}

/** Counts by outcome; attempts still in progress have none and are left out. */
export function summarise(samples: readonly AttemptSample[]): RecentAttempts {
  const ended = samples.filter((s) => s.outcome !== null);
  const count = (...outcomes: AttemptSample["outcome"][]) =>
    ended.filter((s) => outcomes.includes(s.outcome)).length;
  const firstContent = ended
    .filter((s) =>
      (s.outcome === "success" || s.outcome === "resumed") && s.firstContentMs !== null
    )
    .map((s) => s.firstContentMs ?? 0)
    .sort((a, b) => a - b);
  const successes = count("success", "resumed");
  const failures = ended.filter(countsAgainstUpstream).length;
  const rates = ended
    .filter((s) => s.outcome === "success" || s.outcome === "resumed")
    .map(contentRate)
    .filter((rate) => rate !== null)
    .sort((a, b) => a - b);
  return {
    windowMs: HEALTH_WINDOW_MS,
    attempts: ended.length,
    successes,
    failures,
    idleTimeouts: count("idle_timeout"),
    cancelled: count("aborted", "client_disconnected", "hedge_lost"),
    firstContentP50Ms: percentile(firstContent, 0.5),
    firstContentP95Ms: percentile(firstContent, 0.95),
    errorRate: successes + failures === 0 ? null : failures / (successes + failures),
    tokensPerSecP50: percentile(rates, 0.5),
  };
}

/**
 * Content tokens per second after the first content; null for a whole answer or one token,
 * which tell no rate (as gateway/forward/settle.ts measures it).
 */
function contentRate(s: AttemptSample): number | null {
  if (s.firstContentMs === null || s.durationMs === null || s.outputTokens === null) return null;
  const ms = s.durationMs - s.firstContentMs;
  return s.outputTokens < 2 || ms < 1 ? null : s.outputTokens * 1000 / ms;
}

function poolShares(
  pools: readonly PoolView[],
  member: { upstream: string; model: string },
): UpstreamPoolShare[] {
  return pools.flatMap((pool) =>
    pool.members.filter((m) => m.upstream === member.upstream && m.model === member.model).map((
      m,
    ) => ({
      route: pool.route,
      index: pool.index,
      pick: pool.pick,
      model: m.model,
      weight: m.weight,
      share: m.share,
      window: pool.window,
    }))
  );
}

/**
 * docs/design.md "Failover before content": what the upstream is blamed for. Another 4xx is the caller's request (passed back, no
 * cooldown), so it is not one of the upstream's failures.
 */
const OUR_PROBLEM_4XX = new Set([401, 403, 429]);

function countsAgainstUpstream(s: AttemptSample): boolean {
  if (s.outcome === "idle_timeout") return true;
  if (s.outcome !== "error") return false;
  const status = s.status ?? 0;
  const callers = status >= 400 && status < 500 && !OUR_PROBLEM_4XX.has(status);
  return !callers;
}

/** Nearest-rank percentile of sorted values; null when there are none. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(p * sorted.length)));
  return sorted[rank - 1] ?? null;
}
