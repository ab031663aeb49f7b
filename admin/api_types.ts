/**
 * The shapes of the admin JSON API under /admin/api/, shared by the server and the browser
 * bundle. Type-only: the bundle must not pull server modules (zod, libSQL) into the page.
 */
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import type { HistoryOutcome } from "../db/history_queries.ts";
import type { LiveState } from "../gateway/live/live_request.ts";
import type { ConfigProblem } from "../gateway/config/validate.ts";
import type { RepairAction } from "../gateway/config/repair.ts";

export type {
  AttemptRecord,
  ConfigProblem,
  HistoryOutcome,
  LiveState,
  RepairAction,
  RequestRecord,
};

/** Every error of the admin API; the same envelope as the control endpoints. */
export interface ApiError {
  error: { code: string; message: string };
  /** Config saves: each problem at its key path. */
  problems?: ConfigProblem[];
}

/** GET /admin/api/session: answers 200 only to an admin, so it doubles as the sign-in check. */
export interface SessionInfo {
  /** False when the gateway has no admin token and serves loopback only. */
  tokenRequired: boolean;
  /** The built-in demo profile runs: its upstreams are simulated. */
  demo: boolean;
  safeMode: boolean;
  instanceId: string;
}

/** One live request of the fleet, as the live list shows it. */
export interface LiveRow {
  id: string;
  /** The instance that runs it (its id in the instances table; docs/scaling.md). */
  instance: string;
  sessionId: string | null;
  /** The gateway key that made it (null: open proxy). A session id is per key. */
  keyId: string | null;
  clientFormat: string;
  route: string | null;
  stream: boolean;
  /** The upstream of the current hop; null before the first pick. */
  upstream: string | null;
  /** 1-based number of the current hop; 0 before the first pick. */
  hop: number;
  state: LiveState;
  startedAt: number;
  elapsedMs: number;
  /** Since content last reached the client; null while none has. */
  idleMs: number | null;
  /** From the start to the first content sent to the client; null while none has. */
  firstContentMs: number | null;
  inputTokens: number | null;
  outputTokens: number | null;
  /** The abort switch was thrown and the request is unwinding. */
  aborting: boolean;
}

/** The live list's orders: by start, or by how long content has not moved. */
export type LiveSort = "oldest" | "newest" | "idle";

/** Requests per state; a state with none is left out. */
export type LiveStateCounts = Partial<Record<LiveState, number>>;

/** What the live list counts over the whole fleet, whatever the page shows. */
export interface LiveTotals {
  /** Requests running on the instances that answered. */
  running: number;
  /** Of those, the ones the filters and search let through. */
  matching: number;
  /** `running` by state. */
  states: LiveStateCounts;
}

/** Where the page sits among the matching requests, in the asked order. */
export interface LivePagePosition {
  sort: LiveSort;
  /** Matching requests before this page's first row. */
  offset: number;
  /** The page size asked for (at most LIVE_PAGE_MAX). */
  limit: number;
  /** The `after` cursor of the next page; null when this page is the last. */
  next: string | null;
}

/** Which instances the list covers. */
export interface LiveInstances {
  /** Live instances, this one included. */
  total: number;
  /** Their ids, this one first, then the others by id: what the instance filter offers. */
  ids: string[];
  /** Instances that did not answer in time, or answered something unusable. */
  silent: string[];
}

/**
 * One `snapshot` event of GET /admin/api/live, and GET /admin/api/live/snapshot: one page of the
 * running requests that match, the totals over the fleet, and the page's position. Times are
 * real milliseconds.
 */
export interface LiveSnapshot {
  at: number;
  requests: LiveRow[];
  totals: LiveTotals;
  page: LivePagePosition;
  instances: LiveInstances;
  /** What the route and upstream filters offer: the configured ones. */
  choices: { routes: string[]; upstreams: string[] };
}

/** One instance's share of a live page: what POST /admin/peer/live answers (docs/scaling.md). */
export interface LivePart {
  instance: string;
  at: number;
  /** At most the asked page size, in the asked order, after the cursor. */
  rows: LiveRow[];
  running: number;
  matching: number;
  /** Matching requests at or before the cursor. */
  skipped: number;
  states: LiveStateCounts;
}

/** A history row with its attempt chain in short, for the list. */
export interface HistoryRow extends RequestRecord {
  hops: Pick<AttemptRecord, "hop" | "upstream" | "outcome" | "status">[];
}

export interface HistoryCursor {
  startedAt: number;
  id: string;
}

/** GET /admin/api/requests: newest first; `next` continues after the last row. */
export interface HistoryPage {
  requests: HistoryRow[];
  next: HistoryCursor | null;
  /** What the filters offer: the configured routes and upstreams, and every outcome filter. */
  choices: HistoryChoices;
}

export interface HistoryChoices {
  routes: string[];
  upstreams: string[];
  outcomes: HistoryOutcome[];
}

/** GET /admin/api/requests/{id}. */
export interface RequestDetail {
  request: RequestRecord;
  attempts: AttemptRecord[];
}

/** Counts over an upstream's recent attempts (GET /admin/api/health). */
export interface RecentAttempts {
  windowMs: number;
  attempts: number;
  successes: number;
  /** Idle timeouts, 5xx, 429, our-credential 401/403 and connection errors; not caller 4xx. */
  failures: number;
  idleTimeouts: number;
  /** Operator aborts and client disconnects: not the upstream's fault. */
  cancelled: number;
  /** Time to first content of the successful attempts, in real milliseconds. */
  firstContentP50Ms: number | null;
  firstContentP95Ms: number | null;
  /** Failures over attempts that ended as the upstream's doing (successes and failures); null with none. */
  errorRate: number | null;
  /** Median content tokens per second after the first content, of streamed answers; null with none. */
  tokensPerSecP50: number | null;
}

/** A member's place in a pool (docs/design.md "Pools"), as this process routes it. */
export interface UpstreamPoolShare {
  route: string;
  /** The pool's place in the route's candidates. */
  index: number;
  pick: string;
  model: string;
  weight: number;
  /** Its share of the pool's last `window` attempts in this process; null before any. */
  share: number | null;
  window: number;
}

/** ok; paused; probing: its pause ended and one request at a time tests it (docs/design.md "Cooldown"). */
export type CooldownPhaseView = "ok" | "paused" | "probing";

/**
 * One member of an upstream: the upstream with one model a route sends it (a pool member or a
 * plain candidate), with a cooldown of its own (docs/design.md "Cooldown").
 */
export interface MemberHealth {
  model: string;
  /** The member's own cooldown; its upstream's is the upstream's `state`. */
  state: CooldownPhaseView;
  paused: boolean;
  /** Epoch ms the pause ends; null when not paused. */
  pausedUntil: number | null;
  pauseReason: string | null;
  consecutiveFailures: number;
  pauseCount: number;
  /** The upstream's recent attempts that were sent this model. */
  recent: RecentAttempts;
  /** Every pool it is a member of, with its share of that pool's traffic. */
  pools: UpstreamPoolShare[];
}

export interface UpstreamHealth {
  id: string;
  kind: string;
  enabled: boolean;
  inFlight: number;
  maxInFlight: number;
  paused: boolean;
  /** Epoch ms the pause ends; null when not paused. */
  pausedUntil: number | null;
  /** Why it was last paused (e.g. "3 failures in a row; last: gw.upstream.error"). */
  pauseReason: string | null;
  consecutiveFailures: number;
  pauseCount: number;
  /** The upstream as a whole (all its models): ok, paused or probing. */
  state: CooldownPhaseView;
  recent: RecentAttempts;
  /** Each model the config's routes send it, in config order, with its own cooldown and shares. */
  members: MemberHealth[];
}

/** POST /admin/api/upstreams/{id}/resume | enable | disable. */
export interface UpstreamControlResult {
  ok: true;
  upstream: string;
  paused?: false;
  enabled?: boolean;
}

export interface HealthView {
  at: number;
  demo: boolean;
  upstreams: UpstreamHealth[];
  /** Why history is not being recorded right now (database away, writes failing); null when it is. */
  history: string | null;
}

export interface SafeModeView {
  reason: string;
  problems: ConfigProblem[];
  /** The smallest edits that make the stored config load; null when none is obvious. */
  repair: RepairAction[] | null;
}

/** GET /admin/api/config: the document the editor edits. Secrets are env var names only. */
export interface ConfigView {
  /** The stored config as stored (even when invalid), or the demo config when none is. */
  config: unknown;
  source: "stored" | "demo" | "none";
  updatedAt: number | null;
  /** Version of the stored config, raised by every save; null when none is stored. */
  version: number | null;
  /**
   * The version this instance runs. Behind `version` only until its next heartbeat, when a
   * config saved through another instance sharing the database comes into force here too.
   */
  runningVersion: number | null;
  demo: boolean;
  safeMode: SafeModeView | null;
}

/** Answer of a successful save or repair. */
export interface ConfigSaved {
  ok: true;
  config: unknown;
  /** What the repair changed; empty for a plain save. */
  applied: RepairAction[];
}

/** Answer of POST /admin/api/config/validate: a dry run that stores nothing. */
export interface ConfigChecked {
  ok: boolean;
  problems: ConfigProblem[];
}

/** Answer of the abort endpoints (docs/design.md "Abort and disconnect"). */
export interface AbortResult {
  requests: string[];
  /** The fence the abort left (docs/admin.md "Fences"); null when none was made. */
  fence: AbortFence | null;
}

/** A fence as the abort endpoints name it; `GET /admin/api/fences` lists more of it. */
export interface AbortFence {
  id: string;
  kind: "session" | "turn";
  /** ISO 8601. */
  expires_at: string;
}

/** GET /admin/api/costs: totals per route, key or upstream over [since, until). */
export interface CostReport {
  by: "route" | "key" | "upstream";
  since: number;
  until: number;
  totals: {
    group: string | null;
    requests: number;
    inputTokens: number;
    outputTokens: number;
    costUsd: number | null;
  }[];
}

/** GET /admin/api/keys: each configured key's limits and its use against them. */
export interface KeysView {
  keys: {
    id: string;
    enabled: boolean;
    rpm: number | null;
    tpm: number | null;
    budget: { usd: number; period: "day" | "month" } | null;
    /** The key's use, counted only for a key with a limit (null for one without). */
    use: {
      requestsLastMinute: number;
      tokensLastMinute: number;
      /** Spent in the budget's period (the current UTC day without a budget). */
      spentUsd: number;
      periodEndsAt: number;
    } | null;
  }[];
}

/** One fence as `GET /admin/api/fences` lists it; times in epoch ms like the rest of the API. */
export interface FenceView {
  id: string;
  kind: AbortFence["kind"];
  /** The key whose requests it refuses; null: every key's (the admin token's session abort). */
  keyId: string | null;
  sessionId: string | null;
  /** The aborted request a turn fence came from; null for a session fence. */
  requestId: string | null;
  /** The instance that made it. */
  instanceId: string;
  createdAt: number;
  expiresAt: number;
}

/** GET /admin/api/fences: the fences this instance enforces, expiring last first. */
export interface FencesView {
  at: number;
  /**
   * How long an abort's fence of each kind lasts under the config in force, in configured
   * seconds (`abort.session_fence_secs`, `abort.turn_fence_secs`); 0 when that kind is off.
   */
  fenceSecs: Record<AbortFence["kind"], number>;
  fences: FenceView[];
}
