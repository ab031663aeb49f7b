/** Prometheus text metrics kept in memory; labels are rendered in a fixed order. */

type Labels = Record<string, string>;

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** One step of the rendered label sets' cache: after a label's name and value, the next label's. */
interface LabelNode {
  key: string | undefined;
  next: Map<string, Map<string, LabelNode>> | undefined;
}

const LABEL_ROOT: LabelNode = { key: undefined, next: undefined };
/** Bounds the cache: a label with unbounded values (a key id) must not grow it for ever. */
const MAX_LABEL_NODES = 40_000;
let labelNodes = 0;

/**
 * Rendered label sets, cached: the same few sets are counted on every request. Looked up by
 * each name and value in turn, so a lookup builds no string (a joined id per call was about
 * 1 KiB of garbage per request: docs/performance_log.md "Held stream and per-read objects").
 */
function labelKey(labels: Labels): string {
  let node = LABEL_ROOT;
  for (const name in labels) {
    const value = labels[name]!;
    const byName = node.next ??= new Map();
    let byValue = byName.get(name);
    if (byValue === undefined) {
      if (labelNodes >= MAX_LABEL_NODES) return renderLabels(labels);
      byName.set(name, byValue = new Map());
      labelNodes++;
    }
    let child = byValue.get(value);
    if (child === undefined) {
      if (labelNodes >= MAX_LABEL_NODES) return renderLabels(labels);
      byValue.set(value, child = { key: undefined, next: undefined });
      labelNodes++;
    }
    node = child;
  }
  return node.key ??= renderLabels(labels);
}

function renderLabels(labels: Labels): string {
  return Object.entries(labels)
    .map(([k, v]) =>
      `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`
    )
    .join(",");
}

class Counter {
  values = new Map<string, number>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1): void {
    // A value that is not a number (an upstream's NaN or Infinity that got past a check) would
    // stick in the series for good: Prometheus reads `NaN` and every later sum with it.
    if (!Number.isFinite(by)) return;
    const key = labelKey(labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  render(type = "counter"): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${type}`];
    if (!this.values.size && type === "gauge") lines.push(`${this.name} 0`);
    for (const [key, value] of this.values) {
      lines.push(`${this.name}${key ? `{${key}}` : ""} ${value}`);
    }
    return lines.join("\n");
  }
}

/** Content tokens per second: from a slow local model to a fast hosted one. */
const RATE_BUCKETS = [1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000];

class Histogram {
  series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[] = BUCKETS,
  ) {}
  observe(labels: Labels, seconds: number): void {
    const key = labelKey(labels);
    const buckets = this.buckets;
    const s = this.series.get(key) ?? { counts: buckets.map(() => 0), sum: 0, count: 0 };
    for (let i = buckets.length - 1; i >= 0 && seconds <= buckets[i]!; i--) s.counts[i]!++;
    s.sum += seconds;
    s.count++;
    if (s.count === 1) this.series.set(key, s);
  }
  /** One series' count and sum (zero when it has none). */
  get(labels: Labels = {}): { count: number; sum: number } {
    const s = this.series.get(labelKey(labels));
    return { count: s?.count ?? 0, sum: s?.sum ?? 0 };
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const [key, s] of this.series) {
      const sep = key ? `${key},` : "";
      this.buckets.forEach((b, i) =>
        lines.push(`${this.name}_bucket{${sep}le="${b}"} ${s.counts[i]}`)
      );
      lines.push(`${this.name}_bucket{${sep}le="+Inf"} ${s.count}`);
      lines.push(`${this.name}_sum${key ? `{${key}}` : ""} ${s.sum}`);
      lines.push(`${this.name}_count${key ? `{${key}}` : ""} ${s.count}`);
    }
    return lines.join("\n");
  }
}

export class Metrics {
  requests = new Counter("pulsegate_requests_total", "Requests by route and outcome.");
  attempts = new Counter("pulsegate_attempts_total", "Upstream attempts by upstream and outcome.");
  disconnects = new Counter(
    "pulsegate_client_disconnects_total",
    "Requests whose caller left before the end.",
  );
  aborts = new Counter("pulsegate_aborts_total", "Requests stopped by an operator abort.");
  fenceRefusals = new Counter(
    "pulsegate_fence_refusals_total",
    "Requests refused by an operator's fence (an abort that sticks), by kind (session, turn).",
  );
  idleTimeouts = new Counter(
    "pulsegate_idle_timeouts_total",
    "Idle timeouts by upstream and phase (before_content, mid_stream).",
  );
  tokens = new Counter("pulsegate_tokens_total", "Tokens by upstream and direction.");
  cacheTokens = new Counter(
    "pulsegate_cache_tokens_total",
    "Input tokens read from (op=read) or written to (op=write_5m, write_1h) prompt caches.",
  );
  cost = new Counter(
    "pulsegate_cost_total",
    "USD billed by route and upstream, from config prices.",
  );
  historyDropped = new Counter(
    "pulsegate_history_dropped_rows_total",
    "History rows never written: pushed out by the pending bound, or still queued at shutdown.",
  );
  refusedUnrecorded = new Counter(
    "pulsegate_refused_unrecorded_total",
    "Refused requests (401/403/503 before auth) beyond the per-minute history budget: counted, not recorded.",
  );
  keyRefusalsUnrecorded = new Counter(
    "pulsegate_key_refusals_unrecorded_total",
    "Requests refused after auth and before any upstream call (rate limited, bad body, unknown model, ...) beyond their key's per-minute history budget: counted, not recorded.",
  );
  guardrailUnchecked = new Counter(
    "pulsegate_guardrail_unchecked_total",
    "Requests the guardrails could not check in full, by reason and outcome (blocked, allowed).",
  );
  firstContent = new Histogram(
    "pulsegate_time_to_first_content_seconds",
    "Time from request start to first content sent, by route.",
  );
  duration = new Histogram("pulsegate_request_duration_seconds", "Request duration, by route.");
  upstreamCancel = new Histogram(
    "pulsegate_upstream_cancel_seconds",
    "Time from a stop (abort, disconnect, timeout, lost hedge, shutdown) to the upstream connection's close, by upstream and reason.",
  );
  // Pools and upstream health (docs/observability.md "Pools and upstream health").
  upstreamFirstContent = new Histogram(
    "pulsegate_upstream_first_content_seconds",
    "Time from sending an attempt to its first content (keep-alives excluded), by upstream.",
  );
  upstreamContentRate = new Histogram(
    "pulsegate_upstream_content_tokens_per_second",
    "Content tokens per second of answered attempts after their first content, by upstream.",
    RATE_BUCKETS,
  );
  poolHops = new Counter(
    "pulsegate_pool_attempts_total",
    "Attempts sent to pool members, by route, pool (its place in the route) and upstream.",
  );
  probes = new Counter(
    "pulsegate_upstream_probes_total",
    "Probes of upstreams whose pause ended, by upstream and result (ok, failed, released).",
  );
  inflight = 0;
  usageRejected = new Counter(
    "pulsegate_usage_rejected_total",
    "Token counts an upstream reported out of range (not a whole number from 0 to the cap), by " +
      "upstream and field; the gateway's estimate stands in (docs/security.md).",
  );
  keyUsageSetAside = new Counter(
    "pulsegate_key_usage_set_aside_total",
    "Key usage increments the database refused on their own after retries, set aside so the " +
      "other keys' are written; still counted by this process (docs/security.md).",
  );
  /** Bytes of the embedding vector budget held (gateway/forward/vector_budget.ts). */
  embeddingVectorBytes = 0;
  livePeerAnswers = new Counter(
    "pulsegate_live_peer_answers_total",
    "Other instances' shares of a live-list page, by outcome (ok, silent, refused, bad).",
  );
  keyInFlight = new Counter(
    "pulsegate_key_in_flight_requests",
    "Requests in progress per gateway key (keys[].max_in_flight), from admission to the row's close.",
  );

  // Tool servers on /mcp (docs/mcp.md "History and metrics").
  mcpToolCalls = new Counter(
    "pulsegate_mcp_tool_calls_total",
    "Tool calls through /mcp by server and outcome (success, error).",
  );
  mcpToolDuration = new Histogram(
    "pulsegate_mcp_tool_call_duration_seconds",
    "Tool call duration through /mcp, by server.",
  );
  mcpServerCut = new Counter(
    "pulsegate_mcp_server_cut_total",
    "Tool server answers cut by the gateway, by server and reason (flood, malformed, oversized).",
  );
  /** Filled in by the owner of the MCP sessions: how many this process holds. */
  mcpSessions: () => number = () => 0;
  /** Filled in by the owner of the tool servers' cooldowns: each replica charged so far. */
  mcpReplicas: () => Array<{ replica: string; state: string }> = () => [];

  constructor() {
    // Unlabelled counters read 0 from the start, so a scrape can tell "none" from "missing".
    this.disconnects.inc({}, 0);
    this.aborts.inc({}, 0);
    for (const kind of ["session", "turn"]) this.fenceRefusals.inc({ kind }, 0);
    this.historyDropped.inc({}, 0);
    this.refusedUnrecorded.inc({}, 0);
    this.keyRefusalsUnrecorded.inc({}, 0);
  }
  /** Filled in at render time by the owner of cooldown state. */
  cooldown: () => Array<{ upstream: string; paused: boolean; state?: string }> = () => [];
  /** Filled in at render time by the owner of cooldown state: each member's own state. */
  memberCooldown: () => Array<{ upstream: string; model: string; state: string }> = () => [];
  /** Filled in by the owner of the fences: the active ones this process holds, by kind. */
  fences: () => { session: number; turn: number } = () => ({ session: 0, turn: 0 });
  /** Filled in by the server: its open client connections, null when it does not count them. */
  clientConnections: () => number | null = () => null;
  /** Filled in at render time by the owner of the pools: each member's current share. */
  poolShares: () => Array<
    { route: string; pool: number; upstream: string; model: string; share: number }
  > = () => [];

  render(): string {
    const inflight = [
      "# HELP pulsegate_inflight_requests Requests in progress.",
      "# TYPE pulsegate_inflight_requests gauge",
      `pulsegate_inflight_requests ${this.inflight}`,
      "# HELP pulsegate_embedding_vector_bytes Bytes of embedding vectors held in memory (the process's budget).",
      "# TYPE pulsegate_embedding_vector_bytes gauge",
      `pulsegate_embedding_vector_bytes ${this.embeddingVectorBytes}`,
    ].join("\n");
    const open = this.clientConnections();
    const connections = open === null ? [] : [
      "# HELP pulsegate_client_connections Open client connections of this process (PULSEGATE_MAX_CONNECTIONS caps them).",
      "# TYPE pulsegate_client_connections gauge",
      `pulsegate_client_connections ${open}`,
    ];
    const held = this.fences();
    const fences = [
      "# HELP pulsegate_fences_active Operator fences this process holds and enforces, by kind (session, turn).",
      "# TYPE pulsegate_fences_active gauge",
      `pulsegate_fences_active{kind="session"} ${held.session}`,
      `pulsegate_fences_active{kind="turn"} ${held.turn}`,
    ].join("\n");
    const cooldown = [
      "# HELP pulsegate_upstream_cooldown 1 while an upstream is paused.",
      "# TYPE pulsegate_upstream_cooldown gauge",
      ...this.cooldown().map((c) =>
        `pulsegate_upstream_cooldown{${labelKey({ upstream: c.upstream })}} ${c.paused ? 1 : 0}`
      ),
    ].join("\n");
    const states = [
      "# HELP pulsegate_upstream_state 1 for an upstream's state: ok, paused, or probing (its pause ended; one request at a time tests it).",
      "# TYPE pulsegate_upstream_state gauge",
      ...this.cooldown().flatMap((c) =>
        c.state === undefined
          ? []
          : ["ok", "paused", "probing"].map((state) =>
            `pulsegate_upstream_state{${labelKey({ upstream: c.upstream, state })}} ${
              c.state === state ? 1 : 0
            }`
          )
      ),
    ].join("\n");
    const members = [
      "# HELP pulsegate_member_state 1 for a member's (an upstream with one model) own state: ok, paused, or probing.",
      "# TYPE pulsegate_member_state gauge",
      ...this.memberCooldown().flatMap((c) =>
        ["ok", "paused", "probing"].map((state) =>
          `pulsegate_member_state{${labelKey({ upstream: c.upstream, model: c.model, state })}} ${
            c.state === state ? 1 : 0
          }`
        )
      ),
    ].join("\n");
    const shares = [
      "# HELP pulsegate_pool_share Share of a pool's last 200 attempts each member took.",
      "# TYPE pulsegate_pool_share gauge",
      ...this.poolShares().map((p) =>
        `pulsegate_pool_share{${
          labelKey({ route: p.route, pool: String(p.pool), upstream: p.upstream, model: p.model })
        }} ${p.share}`
      ),
    ].join("\n");
    const mcpSessions = [
      "# HELP pulsegate_mcp_sessions MCP sessions this process holds (mcp_sessions.max caps them).",
      "# TYPE pulsegate_mcp_sessions gauge",
      `pulsegate_mcp_sessions ${this.mcpSessions()}`,
      "# HELP pulsegate_mcp_replica_state 1 for a tool server replica's state: ok, paused, or probing.",
      "# TYPE pulsegate_mcp_replica_state gauge",
      ...this.mcpReplicas().flatMap((r) =>
        ["ok", "paused", "probing"].map((state) =>
          `pulsegate_mcp_replica_state{${labelKey({ replica: r.replica, state })}} ${
            r.state === state ? 1 : 0
          }`
        )
      ),
    ].join("\n");
    return [
      this.requests.render(),
      this.attempts.render(),
      inflight,
      ...connections,
      this.keyInFlight.render("gauge"),
      this.disconnects.render(),
      this.aborts.render(),
      this.livePeerAnswers.render(),
      this.fenceRefusals.render(),
      fences,
      this.idleTimeouts.render(),
      cooldown,
      states,
      members,
      shares,
      this.poolHops.render(),
      this.probes.render(),
      this.upstreamFirstContent.render(),
      this.upstreamContentRate.render(),
      this.firstContent.render(),
      this.duration.render(),
      this.upstreamCancel.render(),
      this.tokens.render(),
      this.cacheTokens.render(),
      this.cost.render(),
      this.usageRejected.render(),
      this.keyUsageSetAside.render(),
      this.historyDropped.render(),
      this.guardrailUnchecked.render(),
      this.refusedUnrecorded.render(),
      this.keyRefusalsUnrecorded.render(),
      this.mcpToolCalls.render(),
      this.mcpToolDuration.render(),
      this.mcpServerCut.render(),
      mcpSessions,
    ].join("\n") + "\n";
  }
}
