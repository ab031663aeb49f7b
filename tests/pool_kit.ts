/**
 * Many requests through the candidate loop (gateway/forward/failover.ts) in virtual time, on
 * one set of shared deps (cooldowns, slots, affinity, pools), for the statistics of pools and
 * the half-open probe: each upstream call is played from a script, so a thousand requests run
 * in well under a second and every figure is the same on every run (the picks' randomness is
 * seeded).
 */
import { type ConfigInput, type Route } from "../gateway/config/schema.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { CLIENT_CODECS, UPSTREAM_ADAPTERS } from "../gateway/formats/formats.ts";
import { runCandidates, type RunHop } from "../gateway/forward/failover.ts";
import type { ForwardDeps, ForwardRequest, Hop } from "../gateway/forward/hop.ts";
import { ANSWERED, type HopEnding } from "../gateway/forward/hop_ending.ts";
import { settleContent } from "../gateway/forward/settle.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import { LiveRequest } from "../gateway/live/live_request.ts";
import { Affinity } from "../gateway/route/affinity.ts";
import { Cooldowns, type ProbeStore } from "../gateway/route/cooldown.ts";
import { Pools } from "../gateway/route/pools.ts";
import { Slots } from "../gateway/route/slots.ts";
import type { GatewayError } from "../gateway/runtime/gateway_error.ts";
import { createLogger } from "../gateway/runtime/logger.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import type { AttemptRecord } from "../db/records.ts";
import { seededRandom } from "./seeded_random.ts";
import { VirtualClock } from "./virtual_clock.ts";

/** What a scripted upstream does on one call. */
export interface Act {
  /** Virtual ms before its first content (or its end, without content). */
  wait?: number;
  /** Whether its first content reaches the client. */
  content?: boolean;
  /** Virtual ms its answer streams after the first content. */
  stream?: number;
  /** Content tokens its usage reports. */
  tokens?: number;
  /**
   * How it ends; "silent": never, until something stops the hop; "stuck": never, not even when
   * stopped (a read the runtime never gives back).
   */
  end?: HopEnding | "silent" | "stuck";
}

/** An answer whose first content comes after `wait` virtual ms. */
export const answersAfter = (wait: number, more: Partial<Act> = {}): Act => ({
  wait,
  content: true,
  end: ANSWERED,
  ...more,
});

export const failsWith = (status: number): Act => ({
  end: {
    how: status === 429 ? "rate_limited" : "overloaded",
    error: upstreamStatusError(status, { kind: "openai-chat" }),
  },
});

export interface FleetRequest {
  error: GatewayError | null;
  /** The upstream of each hop, in order. */
  hops: string[];
  attempts: AttemptRecord[];
}

/**
 * Shared deps for many requests on one route ("r"). `play` says what upstream `id` does on its
 * `n`th call (from 0). `probes` stands in for the shared database's claim of a probe.
 */
export function fleet(
  input: {
    upstreams: { id: string; max_in_flight?: number; prices?: Record<string, unknown> }[];
    candidates: ConfigInput["routes"][number]["candidates"];
    failover?: ConfigInput["failover"];
    route?: Partial<ConfigInput["routes"][number]>;
  },
  opts: {
    /** What `upstream` does on its `n`th call, the `nth` of all calls (both from 0). */
    play: (upstream: string, n: number, nth: number) => Act;
    /**
     * Play, count and log each member (`upstream/model`, its cooldown key) apart rather than
     * each upstream: for routes that send one upstream several models.
     */
    byMember?: boolean;
    seed?: number;
    probes?: ProbeStore;
    clock?: VirtualClock;
  },
) {
  const checked = validateConfig({
    failover: input.failover,
    upstreams: input.upstreams.map((u) => ({
      kind: "openai-chat",
      base_url: "http://127.0.0.1:9",
      ...u,
    })),
    routes: [{ model: "r", ...input.route, candidates: input.candidates }],
  });
  if (!checked.ok) throw new Error(JSON.stringify(checked.problems));
  const config = checked.config;
  const clock = opts.clock ?? new VirtualClock();
  const metrics = new Metrics();
  const deps: ForwardDeps = {
    clock,
    config,
    adapters: UPSTREAM_ADAPTERS,
    cooldowns: new Cooldowns(clock, {
      policy: () => ({
        failuresToPause: config.failover.failures_to_pause,
        pauseSecs: config.failover.pause_secs,
        maxPauseSecs: config.failover.max_pause_secs,
      }),
      save: () => {},
      probes: opts.probes,
    }),
    slots: new Slots(clock),
    affinity: new Affinity(),
    pools: new Pools({ random: seededRandom(opts.seed ?? 1) }),
    metrics,
    log: createLogger({ quiet: true }),
    env: () => undefined,
    fetch: () => Promise.reject(new Error("no network in the engine tests")),
  };
  const route = config.routes[0] as Route;
  const calls = new Map<string, number>();
  /** Every upstream call in order, with its virtual time. */
  const log: { upstream: string; at: number }[] = [];
  let count = 0;

  const playHop = async (hop: Hop, act: Act): Promise<HopEnding> => {
    const { signal } = hop.controller;
    if (act.wait) await clock.sleep(act.wait, signal);
    if (act.content) {
      if (!hop.gate.claim()) throw signal.reason;
      hop.idle.touch();
      settleContent(hop);
      hop.req.live.contentSent();
      if (act.stream) await clock.sleep(act.stream, signal);
      if (act.tokens !== undefined) hop.attempt.usage({ outputTokens: act.tokens });
    }
    const end = act.end ?? ANSWERED;
    if (end === "stuck") return await new Promise<never>(() => {});
    if (end !== "silent") return end;
    await new Promise((_, reject) => {
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
    throw new Error("unreachable");
  };
  const runHop: RunHop = (hop) => {
    const id = opts.byMember
      ? `${hop.upstream.id}/${hop.opts.target.candidate.model}`
      : hop.upstream.id;
    const n = calls.get(id) ?? 0;
    calls.set(id, n + 1);
    log.push({ upstream: id, at: clock.sinceStart });
    return playHop(hop, opts.play(id, n, log.length - 1));
  };

  /** One request, from its start to its end (not driven: run it with `clock.run`). */
  const request = async (o: { session?: string; signal?: AbortSignal } = {}) => {
    const attempts = new Map<number, AttemptRecord>();
    const live = new LiveRequest({
      id: `req-${++count}`,
      instanceId: "i1",
      clientFormat: "openai-chat",
      route: "r",
      stream: true,
      keyId: null,
      sessionId: o.session ?? null,
    }, {
      clock,
      metrics,
      sink: { writeRequest: () => {}, writeAttempt: (a) => attempts.set(a.hop, a) },
    });
    if (o.signal) {
      o.signal.addEventListener("abort", () => live.abort(o.signal!.reason), {
        once: true,
      });
    }
    const body = { model: "r", messages: [{ role: "user", content: "hi" }], stream: true };
    const codec = CLIENT_CODECS.chat;
    const req: ForwardRequest = {
      live,
      ir: codec.parseRequest(body, {}),
      body,
      codec,
      ctx: {},
      route,
    };
    const error = await runCandidates(req, { deps, runHop });
    const rows = [...attempts.values()].sort((a, b) => a.hop - b.hop);
    return { error, hops: rows.map((a) => a.upstream), attempts: rows } as FleetRequest;
  };

  return {
    clock,
    deps,
    metrics,
    calls,
    log,
    request,
    /** One request driven to its end in virtual time. */
    one: (o: { session?: string } = {}) => clock.run(request(o)),
    /** `n` requests one after another; answers the upstream each went to first. */
    async sequence(n: number, o: { session?: string } = {}): Promise<string[]> {
      const firsts: string[] = [];
      for (let i = 0; i < n; i++) {
        const done = await clock.run(request(o));
        if (done.error) throw new Error(`request failed: ${done.error.code}`);
        firsts.push(done.hops[0]!);
      }
      return firsts;
    },
  };
}

/** How many of `list` are `value`. */
export function countOf<T>(list: readonly T[], value: T): number {
  return list.reduce((n, v) => n + (v === value ? 1 : 0), 0);
}
