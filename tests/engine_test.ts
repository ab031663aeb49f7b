/**
 * The candidate loop (gateway/forward/failover.ts) in virtual time: real candidates, slots,
 * cooldown, affinity, hedge race and resume pass, with a scripted `runHop` in place of HTTP.
 * Each test runs in microseconds of real time and reads its timings exactly; the end-to-end
 * suites (the fault matrix above all) stay the net for the wire.
 */
import assert from "node:assert/strict";
import { type ConfigInput, type Route } from "../gateway/config/schema.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { CLIENT_CODECS, UPSTREAM_ADAPTERS } from "../gateway/formats/formats.ts";
import { runCandidates, type RunHop } from "../gateway/forward/failover.ts";
import type { ForwardDeps, ForwardRequest, Hop } from "../gateway/forward/hop.ts";
import { ANSWERED, type HopEnding } from "../gateway/forward/hop_ending.ts";
import { ResumePass } from "../gateway/forward/resume_pass.ts";
import { ReplayGate } from "../gateway/forward/replay_gate.ts";
import type { IrEvent, IrUsage } from "../gateway/formats/ir.ts";
import { settleContent } from "../gateway/forward/settle.ts";
import { RESUME_HELD_CHARS, StreamResume } from "../gateway/forward/stream_resume.ts";
import { abortedByOperator } from "../gateway/forward/stop_reasons.ts";
import type { StreamChannel } from "../gateway/forward/client_channel.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import { LiveRequest } from "../gateway/live/live_request.ts";
import { Affinity, affinitySession } from "../gateway/route/affinity.ts";
import { Cooldowns } from "../gateway/route/cooldown.ts";
import { Slots } from "../gateway/route/slots.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import { createLogger } from "../gateway/runtime/logger.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { VirtualClock } from "./virtual_clock.ts";
import { Pools } from "../gateway/route/pools.ts";
import { seededRandom } from "./seeded_random.ts";

/** What a scripted upstream does on one call. */
interface Act {
  /** Virtual ms before anything happens (cut short by the hop's stop, which then ends it). */
  wait?: number;
  /** Building its call throws this, as a translation can (through Hop.build, as every hop builds). */
  buildThrows?: unknown;
  /** Its first content reaches the client, as a stream pump would report it. */
  content?: string;
  /**
   * Frames of events it streams, `gap` virtual ms apart, after `content`: a replaying hop's go
   * through its replay gate (gateway/forward/replay_gate.ts) as the stream pump sends them.
   */
  frames?: IrEvent[][];
  gap?: number;
  /** How it then ends; "silent": never, until something stops the hop. */
  end: HopEnding | "silent";
}

const answers: Act = { end: ANSWERED };
const fails = (status: number, retryAfterSecs?: number): Act => ({
  end: {
    how: status === 429 ? "rate_limited" : "overloaded",
    error: failure(status, retryAfterSecs),
  },
});
const silent: Act = { end: "silent" };

function failure(status: number, retryAfterSecs?: number): GatewayError {
  return upstreamStatusError(status, { retryAfterSecs, kind: "openai-chat" });
}

interface Call {
  upstream: string;
  at: number;
  isLast: boolean;
  resumeAt?: number;
  prefill?: string;
  replay?: true;
}

/** A request through the loop: its deps, its rows, and the calls each upstream saw. */
function engine(
  input: { routes: ConfigInput["routes"]; failover?: ConfigInput["failover"]; ids: string[] },
  opts: { script: Record<string, Act[]>; session?: string },
) {
  const checked = validateConfig({
    failover: input.failover,
    upstreams: input.ids.map((id) => ({ id, kind: "openai-chat", base_url: "http://127.0.0.1:9" })),
    routes: input.routes,
  });
  if (!checked.ok) throw new Error(JSON.stringify(checked.problems));
  const config = checked.config;
  const clock = new VirtualClock();
  const metrics = new Metrics();
  const requests: RequestRecord[] = [];
  const attempts = new Map<string, AttemptRecord>();
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
    }),
    slots: new Slots(clock),
    affinity: new Affinity(),
    pools: new Pools({ random: seededRandom(1) }),
    metrics,
    log: createLogger({ quiet: true }),
    env: () => undefined,
    fetch: () => Promise.reject(new Error("no network in the engine tests")),
  };
  const live = new LiveRequest({
    id: "r1",
    instanceId: "i1",
    clientFormat: "openai-chat",
    route: "r",
    stream: true,
    keyId: null,
    sessionId: opts.session ?? null,
  }, {
    clock,
    metrics,
    sink: {
      writeRequest: (r) => requests.push(r),
      writeAttempt: (a) => attempts.set(`${a.hop}`, a),
    },
  });
  const body = { model: "r", messages: [{ role: "user", content: "hi" }], stream: true };
  const codec = CLIENT_CODECS.chat;
  const route = config.routes[0] as Route;
  const req: ForwardRequest = {
    live,
    ir: codec.parseRequest(body, {}),
    body,
    codec,
    ctx: {},
    route,
  };
  const calls: Call[] = [];
  const left = new Map(Object.entries(opts.script).map(([id, acts]) => [id, [...acts]]));
  const runHop: RunHop = async (hop, { isLast }) => {
    const id = hop.upstream.id;
    const last = hop.req.ir.messages.at(-1);
    calls.push({
      upstream: id,
      at: clock.sinceStart,
      isLast,
      resumeAt: hop.req.resumeAt,
      ...(hop.req.replay ? { replay: true as const } : {}),
      prefill: last?.role === "assistant" && last.content[0]?.type === "text"
        ? last.content[0].text
        : undefined,
    });
    const act = left.get(id)?.shift();
    if (!act) throw new Error(`${id} was called more often than scripted`);
    return await play(hop, act);
  };
  const play = async (hop: Hop, act: Act): Promise<HopEnding> => {
    const { signal } = hop.controller;
    if (act.wait) await clock.sleep(act.wait, signal);
    if (act.buildThrows !== undefined) await hop.build(() => Promise.reject(act.buildThrows));
    if (act.content !== undefined) deliver(hop, { events: [{ type: "text", text: act.content }] });
    const gate = hop.req.replay ? new ReplayGate(hop, resume!) : null;
    for (const events of act.frames ?? []) {
      if (act.gap) await clock.sleep(act.gap, signal);
      // Usage as a pump reports it: on the hop's row (held there while it replays).
      const usage = events.flatMap((ev) => (ev.type === "usage" ? [ev.usage] : [])).at(-1);
      if (usage) hop.attempt.usage(usage);
      const frame = { raw: new Uint8Array(), content: true, events };
      const taken = gate?.holding ? gate.take(frame) : { frame };
      if (taken && "ending" in taken) return taken.ending;
      if (taken) deliver(hop, taken.frame);
    }
    if (act.end !== "silent") return act.end;
    await new Promise((_, reject) => {
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
    throw new Error("unreachable");
  };
  let resume: StreamResume | null = null;
  /** What the client's encoder was given, in order. */
  const sent: IrEvent[] = [];
  const deliver = (hop: Hop, frame: { events: IrEvent[]; usage?: IrUsage }) => {
    if (!hop.attempt.contentSeen) {
      if (!hop.gate.claim()) throw hop.controller.signal.reason;
      settleContent(hop);
      live.contentSent();
    }
    hop.idle.touch();
    sent.push(...(resume?.pass(frame) ?? frame.events));
    const reports = frame.usage || frame.events.some((ev) => ev.type === "usage");
    if (resume?.resuming && reports) live.usage(resume.usage);
  };
  let keepAlives = 0;
  return {
    sent,
    /** The text the client got. */
    text: () => sent.map((e) => (e.type === "text" ? e.text : "")).join(""),
    /** How many times the resume started the client's keep-alives. */
    keepAlives: () => keepAlives,
    attempts,
    clock,
    deps,
    req,
    live,
    calls,
    metrics,
    /** The attempt rows, in hop order: [upstream, outcome, error code]. */
    hops: () => [...attempts.values()].map((a) => [a.upstream, a.outcome, a.errorCode] as const),
    run: () => clock.run(runCandidates(req, { deps, runHop })),
    /** The stream path's loop with mid-stream resume, as stream_forward.ts runs it. */
    runResuming: () => {
      resume = StreamResume.for(req, { client: "openai-chat" });
      const channel = { startKeepAlives: () => keepAlives++ } as unknown as StreamChannel;
      const pass = new ResumePass(req, { deps, resume, channel });
      return clock.run((async () => {
        const error = await runCandidates(req, { deps, runHop, onSettled: pass.watch });
        return await pass.after(error, runHop);
      })());
    },
  };
}

const two = (extra: Partial<ConfigInput["routes"][number]> = {}) => ({
  ids: ["a", "b"],
  routes: [{
    model: "r",
    candidates: [{ upstream: "a", model: "ma" }, { upstream: "b", model: "mb" }],
    ...extra,
  }],
});
const at = (calls: Call[]) => calls.map((c) => `${c.upstream}@${c.at}`);

Deno.test("engine: a 5xx is retried after 0.5 s, doubling, while retries last; then the next answers", async () => {
  const e = engine({ ...two(), failover: { retries_per_candidate: 2 } }, {
    script: { a: [fails(500), fails(503), fails(502)], b: [{ content: "hi", end: ANSWERED }] },
  });
  assert.equal(await e.run(), null);
  assert.deepEqual(at(e.calls), ["a@0", "a@500", "a@1500", "b@1500"]);
  assert.deepEqual(e.hops().map((h) => h[1]), ["error", "error", "error", "success"]);
  // Three failures in a row pause the upstream (failures_to_pause defaults to 3).
  assert.equal(e.deps.cooldowns.isPaused("a"), true);
  assert.equal(e.deps.cooldowns.isPaused("b"), false);
});

Deno.test("engine: a 429's Retry-After is waited instead of the backoff, and pauses the member that said it for it", async () => {
  const e = engine(two(), { script: { a: [fails(429, 3), { content: "x", end: ANSWERED }] } });
  let pausedDuring = false;
  e.clock.after(2_999, () => (pausedDuring = e.deps.cooldowns.isPaused("a/ma")));
  assert.equal(await e.run(), null);
  assert.deepEqual(at(e.calls), ["a@0", "a@3000"]);
  assert.equal(pausedDuring, true);
});

Deno.test("engine: a Retry-After over 10 s is not waited out: the next candidate goes at once", async () => {
  const e = engine(two(), { script: { a: [fails(429, 11)], b: [answers] } });
  assert.equal(await e.run(), null);
  assert.deepEqual(at(e.calls), ["a@0", "b@0"]);
});

Deno.test("engine: the last candidate's 429 stays a 429 with its Retry-After; other failures get timeout_status", async () => {
  const limited = engine(two(), { script: { a: [fails(500), fails(500)], b: [fails(429, 20)] } });
  const error = await limited.run();
  assert.deepEqual([error?.status, error?.code, error?.retryAfterSecs], [
    429,
    "gw.upstream.rate_limited",
    20,
  ]);
  const down = engine(two(), { script: { a: [fails(429, 20)], b: [fails(500), fails(502)] } });
  assert.deepEqual([(await down.run())?.status], [504]);
});

Deno.test("engine: the caller's 4xx ends the request there, uncharged", async () => {
  const rejected: Act = {
    end: { how: "rejected", error: upstreamStatusError(400, { kind: "openai-chat" }) },
  };
  const e = engine(two(), { script: { a: [rejected] } });
  const error = await e.run();
  assert.deepEqual([error?.status, error?.code], [400, "gw.upstream.rejected"]);
  assert.deepEqual(at(e.calls), ["a@0"]);
  assert.equal(e.deps.cooldowns.get("a").consecutiveFailures, 0);
});

Deno.test("engine: a call the gateway cannot build is its own fault: the next answers, nothing is charged", async () => {
  const e = engine({ ...two(), failover: { failures_to_pause: 1 } }, {
    script: {
      a: [{ buildThrows: new RangeError("Maximum call stack size exceeded"), end: ANSWERED }],
      b: [answers],
    },
  });
  assert.equal(await e.run(), null);
  assert.deepEqual(e.hops(), [["a", "error", "gw.gateway.internal"], ["b", "success", null]]);
  assert.equal(e.deps.cooldowns.get("a").pausedUntil, null);
  assert.equal(e.deps.cooldowns.get("a").consecutiveFailures, 0);
});

Deno.test("engine: silence before content fails over at once after the idle timeout, never retried, and unpins the session", async () => {
  const e = engine({ ...two(), failover: { idle_timeout_secs: 30 } }, {
    script: { a: [silent], b: [{ content: "x", end: ANSWERED }] },
    session: "s1",
  });
  const session = affinitySession(e.live.record);
  e.deps.affinity.set("r", { sessionId: session, upstream: "a" });
  let pinDuringB: string | undefined = "unset";
  const answerB = e.calls;
  assert.equal(await e.run(), null);
  pinDuringB = e.deps.affinity.get("r", session);
  assert.deepEqual(at(answerB), ["a@0", "b@30000"]);
  assert.deepEqual(e.hops().map((h) => h[1]), ["idle_timeout", "success"]);
  assert.equal(pinDuringB, "b");
  assert.equal(e.metrics.idleTimeouts.get({ upstream: "a", phase: "before_content" }), 1);
});

Deno.test("engine: a first-content timeout gives up on a silent candidate sooner than the idle timeout", async () => {
  const e = engine({
    ...two({ first_content_timeout_secs: 5 }),
    failover: { idle_timeout_secs: 30 },
  }, {
    script: { a: [silent], b: [answers] },
  });
  assert.equal(await e.run(), null);
  assert.deepEqual(at(e.calls), ["a@0", "b@5000"]);
  assert.deepEqual(e.hops()[0], ["a", "idle_timeout", "gw.upstream.first_content_timeout"]);
});

Deno.test("engine: a break after content ends the request: nothing else is tried, nothing charged", async () => {
  const broke: Act = {
    content: "Hel",
    wait: 100,
    end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
  };
  const e = engine(two(), { script: { a: [broke] } });
  const error = await e.run();
  assert.equal(error?.code, "gw.upstream.error");
  assert.deepEqual(at(e.calls), ["a@0"]);
  assert.equal(e.deps.cooldowns.get("a").consecutiveFailures, 0);
});

Deno.test("engine: a new conversation skips a full upstream; a session waits for its own", async () => {
  const cfg = {
    ids: ["a", "b"],
    routes: two().routes,
    failover: { slot_wait_secs: 10 },
  };
  const fresh = engine(cfg, { script: { b: [answers] } });
  const held = fresh.deps.slots.tryAcquire("a", 1);
  const limit = (e: typeof fresh) => e.deps.config.upstreams.forEach((u) => (u.max_in_flight = 1));
  limit(fresh);
  assert.ok(held);
  assert.equal(await fresh.run(), null);
  assert.deepEqual(at(fresh.calls), ["b@0"]);

  const pinned = engine(cfg, { script: { a: [answers] }, session: "s1" });
  limit(pinned);
  pinned.deps.affinity.set("r", { sessionId: affinitySession(pinned.live.record), upstream: "a" });
  const release = pinned.deps.slots.tryAcquire("a", 1)!;
  pinned.clock.after(2_000, release);
  assert.equal(await pinned.run(), null);
  assert.deepEqual(at(pinned.calls), ["a@2000"]);
});

Deno.test("engine: every candidate full: one wait for the first to free, else 429 gw.slots.full", async () => {
  const cfg = { ...two(), failover: { slot_wait_secs: 10 } };
  const freed = engine(cfg, { script: { b: [answers] } });
  freed.deps.config.upstreams.forEach((u) => (u.max_in_flight = 1));
  freed.deps.slots.tryAcquire("a", 1);
  const releaseB = freed.deps.slots.tryAcquire("b", 1)!;
  freed.clock.after(4_000, releaseB);
  assert.equal(await freed.run(), null);
  assert.deepEqual(at(freed.calls), ["b@4000"]);

  const never = engine(cfg, { script: {} });
  never.deps.config.upstreams.forEach((u) => (u.max_in_flight = 1));
  never.deps.slots.tryAcquire("a", 1);
  never.deps.slots.tryAcquire("b", 1);
  const error = await never.run();
  assert.deepEqual([error?.status, error?.code, error?.retryAfterSecs, never.clock.sinceStart], [
    429,
    "gw.slots.full",
    10,
    10_000,
  ]);
});

Deno.test("engine: a hedge starts the next candidate beside a silent one; the first content wins, the other is hedge_lost", async () => {
  const e = engine(two({ hedge_after_secs: 2 }), {
    script: { a: [silent], b: [{ wait: 500, content: "x", end: ANSWERED }] },
  });
  assert.equal(await e.run(), null);
  assert.deepEqual(at(e.calls), ["a@0", "b@2000"]);
  assert.deepEqual(e.hops().map((h) => [h[0], h[1]]), [["a", "hedge_lost"], ["b", "success"]]);
  assert.equal(e.live.record.upstream, "b");
  assert.equal(e.clock.sinceStart, 2_500);
  assert.equal(e.deps.cooldowns.get("a").consecutiveFailures, 0, "losing a race is no failure");
});

Deno.test("engine: a hedged candidate that fails lets the race go on without it", async () => {
  const e = engine(
    {
      ids: ["a", "b", "c"],
      routes: [{
        model: "r",
        hedge_after_secs: 1,
        max_hedges: 2,
        candidates: ["a", "b", "c"].map((id) => ({ upstream: id, model: `m${id}` })),
      }],
      failover: { retries_per_candidate: 0 },
    },
    {
      script: {
        a: [{ wait: 1_500, end: { how: "overloaded", error: failure(500) } }],
        b: [silent],
        c: [{ wait: 200, content: "x", end: ANSWERED }],
      },
    },
  );
  assert.equal(await e.run(), null);
  // b hedges at 1 s; a fails at 1.5 s; b stays silent a second, so c starts beside it at 2 s.
  assert.deepEqual(at(e.calls), ["a@0", "b@1000", "c@2000"]);
  assert.deepEqual(e.hops().map((h) => h[1]), ["error", "hedge_lost", "success"]);
});

Deno.test("engine: a context-length refusal moves to a larger window, passing over smaller ones", async () => {
  const tooLong = upstreamStatusError(400, {
    kind: "openai-chat",
    body: JSON.stringify({
      error: {
        message: "too long",
        type: "invalid_request_error",
        code: "context_length_exceeded",
      },
    }),
  });
  const e = engine({
    ids: ["a", "b", "c"],
    routes: [{
      model: "r",
      on_context_overflow: "next",
      candidates: [
        { upstream: "a", model: "small", context_window: 8_000 },
        { upstream: "b", model: "same", context_window: 8_000 },
        { upstream: "c", model: "large", context_window: 200_000 },
      ],
    }],
  }, { script: { a: [{ end: { how: "rejected", error: tooLong } }], c: [answers] } });
  assert.equal(await e.run(), null);
  assert.deepEqual(at(e.calls), ["a@0", "c@0"]);
  assert.equal(e.deps.cooldowns.get("a").consecutiveFailures, 0);
});

Deno.test("engine: an abort ends the request at any step, starting nothing after it and holding no slot", async () => {
  interface AbortStep {
    name: string;
    abortAt: number;
    script: Record<string, Act[]>;
    hops: string[];
    outcomes: string[];
  }
  const steps: AbortStep[] = [
    { name: "waiting for a slot", abortAt: 1_000, script: {}, hops: [], outcomes: [] },
    {
      name: "in the backoff",
      abortAt: 200,
      script: { a: [fails(500)] },
      hops: ["a@0"],
      outcomes: ["error"],
    },
    {
      name: "during a hop",
      abortAt: 1_000,
      script: { a: [silent] },
      hops: ["a@0"],
      outcomes: ["aborted"],
    },
    {
      name: "after content",
      abortAt: 1_000,
      script: { a: [{ content: "x", end: "silent" }] },
      hops: ["a@0"],
      outcomes: ["aborted"],
    },
  ];
  for (const step of steps) {
    const e = engine({ ...two(), failover: { slot_wait_secs: 10 } }, {
      script: step.script,
      session: "s",
    });
    if (step.name === "waiting for a slot") {
      e.deps.config.upstreams.forEach((u) => (u.max_in_flight = 1));
      e.deps.affinity.set("r", { sessionId: affinitySession(e.live.record), upstream: "a" });
      e.deps.slots.tryAcquire("a", 1);
    }
    e.clock.after(step.abortAt, () => e.live.abort(abortedByOperator()));
    const error = await e.run();
    assert.equal(error?.code, "gw.request.aborted", step.name);
    assert.deepEqual(at(e.calls), step.hops, step.name);
    assert.equal(e.clock.sinceStart, step.abortAt, step.name);
    assert.equal(e.deps.slots.inFlight("b"), 0, step.name);
    if (step.name !== "waiting for a slot") assert.equal(e.deps.slots.inFlight("a"), 0, step.name);
    assert.deepEqual(e.hops().map((h) => h[1]), step.outcomes, step.name);
  }
});

Deno.test("engine: a stream broken after content is resumed by a prefill candidate from where the client is", async () => {
  const broke: Act = {
    content: "Hello wor",
    end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
  };
  const e = engine({
    ids: ["a", "b"],
    routes: [{
      model: "r",
      resume_after_content: "prefill",
      candidates: [
        { upstream: "a", model: "ma" },
        { upstream: "b", model: "mb", accepts_prefill: true },
      ],
    }],
  }, {
    script: {
      a: [broke],
      b: [
        { end: { how: "rejected", error: upstreamStatusError(400, { kind: "openai-chat" }) } },
      ],
    },
  });
  // b refuses the prefill: a refusal of a continuation is no answer of the caller's, so the
  // request ends with the break it tried to mend.
  const error = await e.runResuming();
  assert.equal(error?.code, "gw.upstream.error");
  assert.deepEqual(e.calls.map((c) => [c.upstream, c.resumeAt, c.prefill]), [
    ["a", undefined, undefined],
    ["b", 9, "Hello wor"],
  ]);

  const mended = engine({
    ids: ["a", "b"],
    routes: [{
      model: "r",
      resume_after_content: "prefill",
      candidates: [
        { upstream: "a", model: "ma" },
        { upstream: "b", model: "mb", accepts_prefill: true },
      ],
    }],
  }, { script: { a: [broke], b: [{ content: "ld", end: ANSWERED }] } });
  assert.equal(await mended.runResuming(), null);
  assert.deepEqual(mended.hops().map((h) => [h[0], h[1]]), [["a", "error"], ["b", "resumed"]]);
});

/** "Hello, wor" reached the client, then the connection broke. */
const brokeAfterHello: Act = {
  frames: [[{ type: "text", text: "Hello, " }], [{ type: "text", text: "wor" }]],
  end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
};
const text = (t: string): IrEvent[] => [{ type: "text", text: t }];
const finish: IrEvent = { type: "finish", reason: "stop" };
const resumeRoute = (
  mode: "prefill" | "replay" | "auto",
  opts: { prefill?: string[]; ids?: string[]; extra?: Record<string, unknown> } = {},
) => {
  const ids = opts.ids ?? ["a", "b"];
  return {
    ids,
    failover: { idle_timeout_secs: 30, retries_per_candidate: 0 },
    routes: [{
      model: "r",
      resume_after_content: mode,
      ...opts.extra,
      candidates: ids.map((id) => ({
        upstream: id,
        model: `m${id}`,
        accepts_prefill: opts.prefill?.includes(id) ?? false,
      })),
    }],
  };
};
const rowOf = (e: ReturnType<typeof engine>, hop: number) => e.attempts.get(String(hop))!;

Deno.test("engine: a replay is sent the original request, held until it has matched all the client has, then relayed from there", async () => {
  const e = engine(resumeRoute("replay"), {
    script: {
      a: [brokeAfterHello],
      // Cut otherwise than the delivered text: only the characters count.
      b: [{ frames: [text("Hel"), text("lo, world"), [...text("!"), finish]], end: ANSWERED }],
    },
  });
  assert.equal(await e.runResuming(), null);
  assert.equal(e.text(), "Hello, world!");
  // Nothing of the replay before the seam: the client's next text is exactly what follows it.
  assert.deepEqual(e.sent.filter((ev) => ev.type === "text").map((ev) => ev.text), [
    "Hello, ",
    "wor",
    "ld",
    "!",
  ]);
  assert.deepEqual(e.calls.map((c) => [c.upstream, c.resumeAt, c.replay, c.prefill]), [
    ["a", undefined, undefined, undefined],
    ["b", 10, true, undefined],
  ]);
  assert.deepEqual(e.hops().map((h) => [h[0], h[1]]), [["a", "error"], ["b", "resumed"]]);
  assert.equal(rowOf(e, 2).resumeOffset, 10);
  assert.equal(e.keepAlives(), 1, "the client is kept alive while the replay catches up");
});

Deno.test("engine: a replay that parts from the delivered text ends with the original failure; nothing of it is sent", async () => {
  for (
    const [name, frames, at] of [
      ["early", [text("Hi there, world!")], 1],
      ["late", [text("Hello, "), text("wo"), text("nderful")], 9],
      ["finished first", [text("Hello"), [finish]], 5],
    ] as const
  ) {
    const e = engine(resumeRoute("replay"), {
      script: { a: [brokeAfterHello], b: [{ frames: frames.map((f) => [...f]), end: ANSWERED }] },
    });
    const error = await e.runResuming();
    assert.equal(error?.code, "gw.upstream.error", name);
    assert.equal(e.text(), "Hello, wor", name);
    assert.deepEqual(e.hops(), [
      ["a", "error", "gw.upstream.error"],
      ["b", "replay_diverged", "gw.upstream.replay_diverged"],
    ], name);
    assert.match(rowOf(e, 2).errorMessage ?? "", new RegExp(`at character ${at} of 10`), name);
    // Another answer is no fault of the upstream's: nothing charged.
    assert.equal(e.deps.cooldowns.get("b").consecutiveFailures, 0, name);
  }
});

Deno.test("engine: an answer past RESUME_HELD_CHARS is not resumed: its break ends it, no candidate is called", async () => {
  const long = "x".repeat(RESUME_HELD_CHARS);
  const broke = (more: string): Act => ({
    frames: [text(long), text(more)],
    end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
  });
  // At the cap the replay still takes over; one character past it, nothing was kept to match.
  const atCap = engine(resumeRoute("replay"), {
    script: {
      a: [broke("")],
      b: [{ frames: [text(long), [...text("!"), finish]], end: ANSWERED }],
    },
  });
  assert.equal(await atCap.runResuming(), null);
  assert.deepEqual(atCap.hops().map((h) => [h[0], h[1]]), [["a", "error"], ["b", "resumed"]]);

  const past = engine(resumeRoute("auto", { prefill: ["b"] }), {
    script: { a: [broke("y")], b: [] },
  });
  const error = await past.runResuming();
  assert.equal(error?.code, "gw.upstream.error");
  assert.deepEqual(past.calls.map((c) => c.upstream), ["a"]);
  assert.equal(past.keepAlives(), 0);
});

Deno.test("engine: after a replay diverges, the next candidate replays; the first to match continues", async () => {
  const e = engine(resumeRoute("replay", { ids: ["a", "b", "c"] }), {
    script: {
      a: [brokeAfterHello],
      b: [{ frames: [text("Hello, there")], end: ANSWERED }],
      c: [{ frames: [text("Hello, world!"), [finish]], end: ANSWERED }],
    },
  });
  assert.equal(await e.runResuming(), null);
  assert.equal(e.text(), "Hello, world!");
  assert.deepEqual(e.hops().map((h) => [h[0], h[1]]), [
    ["a", "error"],
    ["b", "replay_diverged"],
    ["c", "resumed"],
  ]);
});

Deno.test("engine: auto resumes by prefill where a candidate takes one, by replay elsewhere, in route order", async () => {
  const e = engine(resumeRoute("auto", { ids: ["a", "b", "c"], prefill: ["b"] }), {
    script: {
      a: [brokeAfterHello],
      b: [{ end: { how: "rejected", error: upstreamStatusError(400, { kind: "openai-chat" }) } }],
      c: [{ frames: [text("Hello, world!"), [finish]], end: ANSWERED }],
    },
  });
  assert.equal(await e.runResuming(), null);
  assert.equal(e.text(), "Hello, world!");
  assert.deepEqual(e.calls.map((c) => [c.upstream, c.resumeAt, c.replay, c.prefill]), [
    ["a", undefined, undefined, undefined],
    ["b", 10, undefined, "Hello, wor"],
    ["c", 10, true, undefined],
  ]);
  assert.deepEqual(e.hops().map((h) => [h[0], h[1]]), [["a", "error"], ["b", "error"], [
    "c",
    "resumed",
  ]]);
  // A candidate that takes no prefill is never sent one: with "prefill" it is not asked at all.
  const prefillOnly = engine(resumeRoute("prefill", { ids: ["a", "b", "c"], prefill: ["b"] }), {
    script: {
      a: [brokeAfterHello],
      b: [{ end: { how: "rejected", error: upstreamStatusError(400, { kind: "openai-chat" }) } }],
    },
  });
  assert.equal((await prefillOnly.runResuming())?.code, "gw.upstream.error");
  assert.deepEqual(prefillOnly.calls.map((c) => c.upstream), ["a", "b"]);
});

Deno.test("engine: a replay is alive while its own content flows, though the client gets only keep-alives", async () => {
  // Frames 20 s apart: each within the 30 s idle timeout, the catch-up itself 60 s.
  const e = engine(resumeRoute("replay"), {
    script: {
      a: [brokeAfterHello],
      b: [{
        gap: 20_000,
        frames: [text("Hel"), text("lo, "), text("world!"), [finish]],
        end: ANSWERED,
      }],
    },
  });
  assert.equal(await e.runResuming(), null);
  assert.equal(e.text(), "Hello, world!");
  assert.equal(e.clock.sinceStart, 80_000);
  // Silent: its own idle timeout ends it, charged as silence before content is.
  const silentReplay = engine(resumeRoute("replay"), {
    script: { a: [brokeAfterHello], b: [{ frames: [text("Hel")], end: "silent" }] },
  });
  assert.equal((await silentReplay.runResuming())?.code, "gw.upstream.error");
  assert.deepEqual(silentReplay.hops()[1], ["b", "idle_timeout", "gw.upstream.idle_timeout"]);
  assert.equal(silentReplay.clock.sinceStart, 30_000);
  assert.equal(silentReplay.text(), "Hello, wor");
  // Its own first-content limit: the route's first_content_timeout_secs, from its request.
  const slow = engine(resumeRoute("replay", { extra: { first_content_timeout_secs: 5 } }), {
    script: { a: [brokeAfterHello], b: [{ wait: 8_000, frames: [text("Hello")], end: ANSWERED }] },
  });
  assert.equal((await slow.runResuming())?.code, "gw.upstream.error");
  assert.deepEqual(slow.hops()[1], ["b", "idle_timeout", "gw.upstream.first_content_timeout"]);
  assert.equal(slow.clock.sinceStart, 5_000);
});

Deno.test("engine: a replay whose content matches nothing more is not kept alive by it: its idle timeout ends it", async () => {
  // After "Hel", every 20 s a frame of usage alone or an empty delta: content to the pump, no
  // step towards what the client has. Each came within the 30 s idle timeout of the last.
  const idleFrames = Array.from(
    { length: 20 },
    (_, i): IrEvent[] => i % 2 ? [{ type: "usage", usage: { outputTokens: i } }] : text(""),
  );
  const e = engine(resumeRoute("replay"), {
    script: {
      a: [brokeAfterHello],
      b: [{ gap: 20_000, frames: [text("Hel"), ...idleFrames], end: "silent" }],
    },
  });
  assert.equal((await e.runResuming())?.code, "gw.upstream.error");
  assert.deepEqual(e.hops()[1], ["b", "idle_timeout", "gw.upstream.idle_timeout"]);
  // "Hel" matched at 20 s; nothing after it did: 30 s later it is given up on.
  assert.equal(e.clock.sinceStart, 50_000);
  assert.equal(e.text(), "Hello, wor");
});

Deno.test("engine: a delivered tool call is resumed only by a replay that matches its name and arguments; ids may differ", async () => {
  const call = (id: string, index: number): IrEvent => ({
    type: "tool_call_start",
    index,
    id,
    name: "lookup",
  });
  const args = (index: number, a: string): IrEvent => ({ type: "tool_call_args", index, args: a });
  const broke: Act = {
    frames: [text("Let me look. "), [call("call_a", 0), args(0, '{"city":')]],
    end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
  };
  // The replay numbers its call 3 and names it anew: the client's stays call_a at index 0.
  const replay: Act = {
    frames: [
      text("Let me look. "),
      [call("call_b", 3), args(3, '{"ci')],
      [args(3, 'ty":"Paris"}'), { type: "finish", reason: "tool_calls" }],
    ],
    end: ANSWERED,
  };
  const e = engine(resumeRoute("replay"), { script: { a: [broke], b: [replay] } });
  assert.equal(await e.runResuming(), null);
  const calls = e.sent.filter((ev) =>
    ev.type === "tool_call_start" || ev.type === "tool_call_args"
  );
  assert.deepEqual(calls, [call("call_a", 0), args(0, '{"city":'), args(0, '"Paris"}')]);
  assert.equal(rowOf(e, 2).resumeOffset, "Let me look. ".length + "lookup".length + 8);

  const other = engine(resumeRoute("replay"), {
    script: {
      a: [broke],
      b: [{
        frames: [text("Let me look. "), [call("x", 0), args(0, '{"town":"P"}')]],
        end: ANSWERED,
      }],
    },
  });
  assert.equal((await other.runResuming())?.code, "gw.upstream.error");
  assert.equal(other.hops()[1]![1], "replay_diverged");
  // A prefill cannot continue arguments: with "prefill" such a stream is never resumed.
  const prefill = engine(resumeRoute("prefill", { prefill: ["b"] }), { script: { a: [broke] } });
  assert.equal((await prefill.runResuming())?.code, "gw.upstream.error");
  assert.deepEqual(prefill.calls.map((c) => c.upstream), ["a"]);
});

Deno.test("engine: a replay's tokens stay on its own row until it catches up; then the answer's usage sums the hops", async () => {
  const usage = (inputTokens: number, outputTokens: number): IrEvent => ({
    type: "usage",
    usage: { inputTokens, outputTokens },
  });
  const a: Act = {
    frames: [[usage(5, 1)], text("Hello, wor")],
    end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
  };
  const diverges = engine(resumeRoute("replay"), {
    script: { a: [a], b: [{ frames: [[usage(6, 1), ...text("Bye")]], end: ANSWERED }] },
  });
  await diverges.runResuming();
  assert.equal(diverges.live.record.inputTokens, 5, "the request's row keeps the answer's tokens");
  const matches = engine(resumeRoute("replay"), {
    script: {
      a: [a],
      b: [{
        frames: [[usage(6, 1), ...text("Hello, world!")], [finish, usage(6, 4)]],
        end: ANSWERED,
      }],
    },
  });
  assert.equal(await matches.runResuming(), null);
  const last = matches.sent.filter((ev) => ev.type === "usage").at(-1);
  const read = last?.type === "usage" ? last.usage : {};
  assert.deepEqual([read.inputTokens, read.outputTokens], [11, 5]);
  const r = matches.live.record;
  assert.deepEqual([r.inputTokens, r.outputTokens], [11, 5]);
  assert.deepEqual([rowOf(matches, 2).inputTokens, rowOf(matches, 2).outputTokens], [6, 4]);
  assert.deepEqual([rowOf(diverges, 2).inputTokens, rowOf(diverges, 2).outputTokens], [6, 1]);
});

Deno.test("engine: on a route that hedges, a slow replay's catch-up lets the next replay start beside it; the first to catch up continues", async () => {
  const e = engine(
    resumeRoute("replay", { ids: ["a", "b", "c"], extra: { hedge_after_secs: 1 } }),
    {
      script: {
        a: [brokeAfterHello],
        // b streams at once but slowly: its content does not count as the answer's until it caught up.
        b: [{
          gap: 900,
          frames: [text("Hel"), text("lo, "), text("world!"), [finish]],
          end: ANSWERED,
        }],
        c: [{ gap: 100, frames: [text("Hello, world!"), [finish]], end: ANSWERED }],
      },
    },
  );
  assert.equal(await e.runResuming(), null);
  assert.equal(e.text(), "Hello, world!");
  assert.deepEqual(at(e.calls), ["a@0", "b@0", "c@1000"]);
  assert.deepEqual(e.hops().map((h) => [h[0], h[1]]), [
    ["a", "error"],
    ["b", "hedge_lost"],
    ["c", "resumed"],
  ]);
  assert.equal(e.clock.sinceStart, 1_200);
});

Deno.test("engine: a broken stream is resumed by a prefill-capable member of a pool, the pick still ordering it", async () => {
  const broke: Act = {
    content: "Hello wor",
    end: { how: "connection", error: new GatewayError("reset", { code: "gw.upstream.error" }) },
  };
  const e = engine({
    ids: ["a", "b", "c"],
    routes: [{
      model: "r",
      resume_after_content: "prefill",
      candidates: [
        { upstream: "a", model: "ma" },
        {
          pool: [
            { upstream: "b", model: "mb", accepts_prefill: true },
            { upstream: "c", model: "mc", accepts_prefill: true },
          ],
        },
      ],
    }],
  }, {
    script: {
      a: [broke],
      b: [{ content: "ld", end: ANSWERED }],
      c: [{ content: "ld", end: ANSWERED }],
    },
  });
  assert.equal(await e.runResuming(), null);
  const [first, resumed] = e.calls;
  assert.equal(e.calls.length, 2);
  assert.equal(first!.upstream, "a");
  assert.ok(["b", "c"].includes(resumed!.upstream));
  assert.deepEqual([resumed!.resumeAt, resumed!.prefill], [9, "Hello wor"]);
  assert.deepEqual(e.hops().map((h) => h[1]), ["error", "resumed"]);
});
