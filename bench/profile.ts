/**
 * How much of each scenario a run does. The full profile is sized to finish in about 11 minutes
 * on the 2-core machine; `--quick` runs every scenario in miniature (about a minute) so the test
 * that runs it keeps the whole pipeline from rotting.
 */
export interface Profile {
  name: "full" | "quick";
  latency: { rounds: number; perRound: number; warmup: number; budgetMs: number };
  throughput: {
    concurrency: number[];
    seconds: number;
    warmupSeconds: number;
    /** The zero-delay sweep (p99 under 20 ms): its levels; a target stops at its first miss. */
    zeroDelayConcurrency: number[];
  };
  streaming: { rounds: number; concurrency: number; budgetMs: number };
  held: {
    counts: number[];
    /** Also hold this many through the floor, for a reference figure of memory per stream. */
    floorCount: number | null;
    openPerSecond: number;
    deltas: number;
    deltaGapMs: number;
  };
  history: {
    /** Requests' rows the writer alone writes through its worker (the gateway's executor). */
    requests: number;
    /** The same on the calling thread, a contrast only: fewer, to keep it cheap. */
    inThreadRequests: number;
    chunk: number;
    backlog: number;
    /** Load put on the gateway while the in-process probe watches for stalls. */
    concurrency: number;
    seconds: number;
  };
  /**
   * Scenario 7: requests of history generated (BENCH_HISTORY_REQUESTS overrides), how often each
   * admin call is timed, and proxied answers timed alone and while the admin calls run.
   */
  historyAtScale: { requests: number; adminRepeats: number; proxied: number };
  /** Scenario 6: alternating repetitions of CPU per delta and per whole answer. */
  cpuCost: { reps: number; streams: number; rounds: number; concurrency: number; seconds: number };
  /**
   * Scenario 8: streams held (split over two processes in the fleet case), how fast they open,
   * each measuring window, and whether the tabs are Chromium's (else raw feeds).
   */
  liveView: { streams: number; openPerSecond: number; windowSeconds: number; browser: boolean };
  /** Portkey is installed with npm on first use; quick runs use it only if already there. */
  installPortkey: boolean;
}

export const FULL: Profile = {
  name: "full",
  latency: { rounds: 20, perRound: 150, warmup: 300, budgetMs: 90_000 },
  throughput: {
    concurrency: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    seconds: 3,
    warmupSeconds: 1,
    zeroDelayConcurrency: [1, 2, 4, 8, 16, 32, 64, 128, 256],
  },
  streaming: { rounds: 4, concurrency: 4, budgetMs: 60_000 },
  held: {
    counts: [250, 1_000, 5_000],
    floorCount: 5_000,
    openPerSecond: 2_500,
    // Slow content: 5,000 streams at one delta per 2.5 s is 2,000 deltas/s in all, which the
    // load core (fake + client) relays on time, so lateness is the proxy's.
    deltas: 4,
    deltaGapMs: 2_500,
  },
  history: {
    requests: 50_000,
    inThreadRequests: 20_000,
    chunk: 100,
    backlog: 5_000,
    concurrency: 64,
    seconds: 5,
  },
  cpuCost: { reps: 5, streams: 128, rounds: 2, concurrency: 16, seconds: 3 },
  historyAtScale: { requests: 10_000_000, adminRepeats: 3, proxied: 500 },
  liveView: { streams: 10_000, openPerSecond: 2_000, windowSeconds: 10, browser: true },
  installPortkey: true,
};

export const QUICK: Profile = {
  name: "quick",
  latency: { rounds: 2, perRound: 50, warmup: 30, budgetMs: 10_000 },
  // One level: each level of each target starts a load process (seconds of CPU each).
  throughput: { concurrency: [16], seconds: 1, warmupSeconds: 0, zeroDelayConcurrency: [1] },
  streaming: { rounds: 1, concurrency: 2, budgetMs: 10_000 },
  held: { counts: [50], floorCount: null, openPerSecond: 1_000, deltas: 2, deltaGapMs: 200 },
  history: {
    requests: 1_000,
    inThreadRequests: 500,
    chunk: 100,
    backlog: 500,
    concurrency: 16,
    seconds: 1,
  },
  // One repetition: the rotation and the spread are the full run's; here the pipeline is the point.
  cpuCost: { reps: 1, streams: 4, rounds: 1, concurrency: 16, seconds: 1 },
  historyAtScale: { requests: 20_000, adminRepeats: 1, proxied: 30 },
  // Raw feeds, no browser: the pipeline is the point, and Chromium would double the quick run.
  liveView: { streams: 200, openPerSecond: 1_000, windowSeconds: 1, browser: false },
  installPortkey: false,
};
