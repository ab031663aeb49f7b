/** The shape of bench/results.json: every figure the doc shows, and how it was taken. */
import type { Summary } from "./stats.ts";
import type { TargetId } from "./targets.ts";

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  kernel: string;
  deno: string;
  v8: string;
  node: string | null;
  fileLimit: number | null;
  /**
   * CPU that processes other than the bench's used during the run, as a share of one core:
   * other sessions' work on a shared machine shows here, and disturbs the figures.
   */
  otherLoadPercentOfCore?: number;
  /** The same just before the run, after waiting (bounded) for a quiet moment. */
  otherLoadAtStartPercentOfCore?: number;
}

export interface Skipped {
  target: TargetId;
  reason: string;
}

export interface LatencyRow {
  target: TargetId;
  label: string;
  latencyMs: Summary;
  /** This target's p50/p99 minus direct's; null for direct itself. */
  addedMs: { p50: number; p99: number } | null;
  errors: number;
  errorExamples: string[];
}

export interface AddedLatencyResult {
  requestsPerTarget: number;
  rounds: number;
  rows: LatencyRow[];
  skipped: Skipped[];
}

export interface ThroughputLevel {
  concurrency: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Connection errors, timeouts and non-2xx answers together. */
  errors: number;
  /** CPU the proxy process spent per request (user + system), null for direct. */
  cpuUsPerRequest: number | null;
  /** Longest event-loop stall inside pulsegate during the level (its probe), else null. */
  maxStallMs: number | null;
  /** The first level to miss the bound is run twice; the better run is kept. */
  retried: boolean;
}

export interface ThroughputRow {
  target: TargetId;
  label: string;
  levels: ThroughputLevel[];
  /** Highest requests/s of a level with p99 under the bound and no error; 0 when none. */
  bestRps: number;
  bestConcurrency: number | null;
  /** The proxy's resident memory right after the last level; null for direct, absent before. */
  rssAfterMiB?: number | null;
}

/** One sweep of concurrency levels against one fake route, with its p99 bound. */
export interface ThroughputSweep {
  upstreamDelayMs: number;
  boundMs: number;
  secondsPerLevel: number;
  rows: ThroughputRow[];
}

export interface ThroughputResult extends ThroughputSweep {
  skipped: Skipped[];
  /**
   * The floor and pulsegate against the zero-delay route with a 20 ms p99 bound (requests/s at
   * p99 under 20 ms, as published gateway comparisons count it); absent from older runs.
   */
  zeroDelay?: ThroughputSweep;
}

export interface StreamingRow {
  target: TargetId;
  label: string;
  streams: number;
  complete: number;
  lostDeltas: number;
  ttftMs: Summary;
  delayMs: Summary;
  addedGapMs: Summary;
  /** Versus direct: time to first token, per-delta delay (p50, p99). Null for direct. */
  added: { ttftP50: number; ttftP99: number; delayP50: number; delayP99: number } | null;
  /** The proxy's CPU over the scenario divided by the deltas it relayed; null for direct. */
  cpuUsPerDelta: number | null;
  errors: string[];
}

export interface StreamingResult {
  deltas: number;
  deltaGapMs: number;
  rows: StreamingRow[];
  skipped: Skipped[];
}

export interface HeldRow {
  target: TargetId;
  label: string;
  count: number;
  held: number;
  rampMs: number;
  rssBeforeMiB: number;
  rssHeldMiB: number;
  bytesPerStream: number;
  /**
   * Of that, V8 heap in use and external memory (read buffers), read without a GC, so garbage
   * counts; null outside pulsegate.
   */
  heapBytesPerStream: number | null;
  externalBytesPerStream: number | null;
  /**
   * The JS heap one held stream keeps alive: heap used after a full GC, before and while `count`
   * streams are held a second time on the same gateway (its content never sent: those streams
   * are cancelled), divided by `count`. Null outside pulsegate; absent from older runs.
   */
  liveHeapBytesPerStream?: number | null;
  completeStreams: number;
  lostDeltas: number;
  lateDeltas: number;
  delayMs: Summary;
  keepAlivesMin: number;
  /** CPU the proxy used from the first stream opened to the last one ended. */
  proxyCpuSeconds: number;
  /** `pulsegate_inflight_requests` once every stream ended; null where there is no such metric. */
  inflightAfter: number | null;
  errors: number;
  errorExamples: string[];
}

export interface HeldResult {
  timeScale: number;
  holdMs: number;
  keepAliveMs: number;
  deltas: number;
  deltaGapMs: number;
  lateMs: number;
  rows: HeldRow[];
}

export interface HistoryUnderLoad {
  target: TargetId;
  rps: number;
  rowsPerSecond: number;
  /** Rows the writer wrote during the run divided by the requests answered. */
  rowsPerRequest: number;
  batches: number;
  /** Each batch's time as the writer reports it: on the worker thread for a local file. */
  batchMs: Summary;
  /** The serving thread's event-loop probe. */
  maxStallMs: number;
  p99StallMs: number;
  stallsOver10ms: number;
  /** The gateway process's CPU (all threads) per request answered; null off Linux. */
  cpuUsPerRequest: number | null;
  /** Of that, the serving (main) thread's and the history worker thread's. */
  servingCpuUsPerRequest: number | null;
  workerCpuUsPerRequest: number | null;
}

/** The writer alone, in a process of its own, with one executor. */
export interface HistoryWriterRun {
  /** `worker`: the gateway's executor for a local file; `in-thread`: a contrast only. */
  executor: "worker" | "in-thread";
  rows: number;
  rowsPerSecond: number;
  rowsPerBatch: number;
  batchMs: Summary;
  /** The calling thread's event-loop probe while rows were written. */
  maxStallMs: number;
  p99StallMs: number;
  /** The same probe before any row was written: this machine's stall floor. */
  idleStallMs: { max: number; p99: number };
  backlogRows: number;
  backlogStallMs: number;
}

export interface HistoryResult {
  writer: HistoryWriterRun;
  /** The same with each batch run on the calling thread (`inProcessExecutor`), for contrast. */
  writerInThread: HistoryWriterRun | null;
  underLoad: { concurrency: number; seconds: number; rows: HistoryUnderLoad[] };
}

/** Scenario 6: CPU per delta and per whole answer, each repetition's figure kept. */
export interface CpuCostResult {
  reps: number;
  load: { streams: number; concurrency: number; seconds: number };
  rows: Array<{
    target: TargetId;
    label: string;
    usPerDelta: number[];
    usPerRequest: number[];
    /** Resident memory after each repetition's whole answers. */
    rssMiB: number[];
    errors: number;
  }>;
}

export interface TargetCheck {
  id: string;
  target: string;
  measured: string;
  met: boolean | null;
  /** How far off, in words, when missed; what was measured instead when not measurable. */
  gap: string;
  /** What would close it, with the measured figures that say so; empty when met. */
  closeWith: string;
}

export interface BenchResults {
  version: 1;
  profile: "full" | "quick";
  startedAt: string;
  seconds: number;
  machine: Machine;
  setup: {
    proxyCpus: string | null;
    loadCpus: string | null;
    loadGenerator: string;
    peer: string | null;
    historyOff: string;
    database: string;
    notes: string[];
  };
  scenarios: {
    addedLatency: AddedLatencyResult;
    throughput: ThroughputResult;
    streaming: StreamingResult;
    heldStreams: HeldResult;
    historyWrites: HistoryResult;
    /** Absent from runs before it existed. */
    cpuCost?: CpuCostResult;
    /** Absent from runs before it existed. */
    historyAtScale?: HistoryAtScaleResult;
    /** Absent from runs before it existed. */
    liveView?: LiveViewResult;
  };
  /** Where pulsegate's CPU goes under load (an in-process CPU profile), when it was taken. */
  hotPath: HotPathProfile | null;
  /** The same for streamed answers. */
  hotPathStream: HotPathProfile | null;
  /** The serving thread while scenario 4's largest count gets its content (held_profile.ts). */
  hotPathHeld?: HotPathProfile | null;
  targets: TargetCheck[];
  /**
   * The same targets judged over an earlier run's figures (bench/results_before.json, when it is
   * there), for the doc's before → after table.
   */
  before?: { startedAt: string; label: string; targets: TargetCheck[] } | null;
}

export interface HotSpot {
  /** `function (file:line)`, or a file alone in `byFile`. */
  name: string;
  selfPercent: number;
}

export interface HotPathProfile {
  route: string;
  stream: boolean;
  history: boolean;
  concurrency: number;
  seconds: number;
  rps: number;
  /** Top functions by self time, and the same time summed per file. */
  byFunction: HotSpot[];
  byFile: HotSpot[];
}

/** Scenario 7 (bench/scenarios/history_at_scale.ts). */
export interface HistoryAtScaleResult {
  requests: number;
  fillSeconds: number;
  /** The file's pages after the fill, and per request. */
  bytes: number;
  bytesPerRequest: number;
  /** Each admin call the page makes, timed against the history. */
  admin: { name: string; path: string; status: number; p50Ms: number; maxMs: number }[];
  /** One proxied answer after another: alone, and while the admin calls run back to back. */
  proxiedP99Ms: { alone: number; duringAdmin: number };
  proxiedP50Ms: { alone: number; duringAdmin: number };
  adminCallsDuring: number;
}

/** Scenario 8 (bench/scenarios/live_view.ts): the admin page's live view over held streams. */
export interface LiveViewResult {
  windowSeconds: number;
  tabs: number;
  /** The browser the tabs ran in; null when the tabs were raw feeds (no Chromium, or quick). */
  browser: string | null;
  cases: LiveViewCase[];
}

export interface LiveViewCase {
  label: string;
  instances: number;
  streams: number;
  /** The streams the gateways counted as running before the tabs opened. */
  running: number;
  /** One tab's feed over the window: bytes per tick (snapshot or heartbeat), mean and largest. */
  bytesPerTick: { mean: number; max: number; ticks: number; heartbeats: number };
  /** The gateways' CPU (all processes) per open tab, % of one core, three tabs against none. */
  cpuPercentPerTab: number;
  /** The same with no tab open, for scale: the held streams' own cost. */
  cpuPercentNoTab: number;
  healthzP99Ms: { none: number; threeTabs: number };
  /** The largest share of a tab's main thread in long tasks over the window; null: no browser. */
  longTaskShare: number | null;
  /** Typing an id in Search to the abort's result on the page; null: no browser. */
  findAndAbortMs: number | null;
  errors: number;
  errorExamples: string[];
}
