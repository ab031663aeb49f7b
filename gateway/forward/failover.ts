import { describeSkipped, inexpressible, memberOf, planCandidates } from "../route/candidates.ts";
import { affinitySession } from "../route/affinity.ts";
import type { UpstreamKind } from "../formats/format.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import { type Candidate, type ForwardDeps, type ForwardRequest, Hop } from "./hop.ts";
import type { HopEnding } from "./hop_ending.ts";
import { stopReason } from "./stop_reasons.ts";
import { HedgeRace } from "./hedge_race.ts";
import type { Lane } from "./hedge_lane.ts";
import { ContextOverflow } from "../route/context_overflow.ts";
import { type Answered, type Failed, settle, type Settled } from "./settle.ts";
import { finalStatus, retryWait } from "./verdict.ts";
import { notHome } from "../route/interaction_pin.ts";
import { claimMemberProbes } from "../route/cooldown_levels.ts";
import { ProbeHold } from "./probe_hold.ts";

/**
 * One hop's work: send, read, and say how it ended (hop_ending.ts). It
 * decides nothing: `settle` does, by the verdict table.
 */
export type RunHop = (hop: Hop, opts: { isLast: boolean }) => Promise<HopEnding>;

/** What one candidate (with its retries) came to. */
export type Outcome = Answered | Failed<"next" | "stop">;

/** Told of every hop's settled end (mid-stream resume watches the loop through it). */
export type OnSettled = (hop: Hop, settled: Settled) => void;

interface LoopOpts {
  deps: ForwardDeps;
  runHop: RunHop;
  onSettled?: OnSettled;
}

/**
 * The candidate loop of docs/design.md "Failover before content", in four
 * steps: plan the candidates; try each in order (with its retries); if some
 * were full, wait once for the first of them to free a slot and try it; then
 * report. What follows each hop is the verdict table's (verdict.ts): `stop`
 * ends the request there, so a started answer is never handed to another
 * candidate. Answers the error to give the client, or null when a hop
 * delivered the answer.
 *
 * A route that hedges (docs/liveness.md, "Hedged start") runs the same loop
 * through a race: a candidate silent for `hedge_after_secs` lets the loop go
 * on to the next one while it keeps running, and the first to send content
 * wins. Every hop the race started has ended before this returns.
 */
export function runCandidates(
  req: ForwardRequest,
  opts: LoopOpts,
): Promise<GatewayError | null> {
  const { plan, skipped } = planFor(req, opts.deps);
  const race = HedgeRace.for(req, { deps: opts.deps, plan });
  // Returned as it is when there is no race to settle: no frame of this function's, nor a
  // promise of its own, stays for a stream's whole life (a held stream's heap,
  // docs/performance_log.md "One object per held stream").
  if (!race) return tryInOrder(req, { ...opts, plan, skipped, race });
  return raced(req, { ...opts, plan, skipped, race });
}

/** The loop through a hedge race: every hop the race started has ended before it returns. */
async function raced(
  req: ForwardRequest,
  opts: LoopOpts & { plan: Candidate[]; skipped: ReadonlyMap<string, string[]>; race: HedgeRace },
): Promise<GatewayError | null> {
  try {
    return await tryInOrder(req, opts);
  } finally {
    await opts.race.settle();
  }
}

async function tryInOrder(
  req: ForwardRequest,
  opts: LoopOpts & {
    plan: Candidate[];
    skipped: ReadonlyMap<string, string[]>;
    race: HedgeRace | null;
  },
): Promise<GatewayError | null> {
  const { deps, plan, skipped, race } = opts;
  const { live } = req;
  if (!plan.length) return skipped.size ? cannotExpress(req, { skipped, deps }) : noCandidate(req);
  const tried: string[] = [];
  // Every error the loop ends with names the candidates tried and those passed over.
  const chain = { tried, skipped: describeSkipped(skipped) };
  const full: Candidate[] = [];
  let failed: Failed<"next"> | null = null;
  // Made at the first context-length refusal that moves on: most requests never see one.
  let overflow: ContextOverflow | null = null;
  for (let i = 0; i < plan.length; i++) {
    const target = plan[i]!;
    if (overflow?.skips(target)) continue;
    // Half-open (docs/design.md "Cooldown"): tried only with its one probe; else passed over.
    const claim = target.probe ? await claimProbe(target, { req, deps }) : null;
    // Given back as the loop leaves this candidate, unless a hop took it (probe_hold.ts).
    using probe = claim === "taken" ? null : claim;
    if (target.probe && stopReason(live.signal)) return stopReason(live.signal)!;
    if (claim === "taken") continue;
    // A hedge never waits for a slot while another candidate runs: it is tried later if full.
    const wait = isAffine(target, req, deps) && !race?.running;
    const release = await takeSlot(target, { req, deps, wait });
    if (!release) {
      if (stopReason(live.signal)) return stopReason(live.signal)!;
      // The session's own upstream was already waited for, for as long as a wait may last;
      // a probe is not waited for either: the next request may claim it.
      if (!wait && !target.probe) full.push(target);
      continue;
    }
    // A later full candidate may still be waited for, so this one is last only if none was full.
    const isLast = i === plan.length - 1 && !full.length;
    const start = (lane: Lane | null = null) => {
      probe?.send();
      return tryCandidate(req, { ...opts, target, release, isLast, tried, lane, probe });
    };
    // The last candidate, with no race: only the loop's end follows its outcome, so that end is
    // a reaction on its promise and this frame is not kept suspended for the stream's whole life
    // (docs/performance_log.md "One object per held stream"). Its probe was sent by `start`,
    // so leaving the `using` scope now gives nothing back.
    if (isLast && !race) return start().then((last) => lastEnded(last, { req, chain, deps }));
    // Without a hedge race (most routes: request_plan.ts) the candidate simply runs; the race's
    // closures are made only for a race.
    const outcome = race
      ? await race.run(target, {
        start,
        // A race already decided starts nothing more: the slot and the probe go back unused, now.
        release: () => {
          release();
          probe?.end("unsent");
        },
        more: i < plan.length - 1,
      })
      : await start();
    // Still running, silent past its hedge delay: the next candidate starts beside it.
    if (!outcome) continue;
    if (outcome.step !== "next") return ended(outcome, { req, chain });
    if (stopReason(live.signal)) return stopReason(live.signal)!;
    if (outcome.onward === "larger_window") (overflow ??= new ContextOverflow()).note(target);
    failed = outcome;
  }
  const rest = race ? await race.drain() : null;
  if (rest && rest.step !== "next") return ended(rest, { req, chain });
  if (rest) failed = rest;
  const waitable = overflow ? full.filter((target) => !overflow!.skips(target)) : full;
  if (waitable.length) {
    const freed = await waitForAny(waitable, { req, deps });
    if (stopReason(live.signal)) return stopReason(live.signal)!;
    if (freed) {
      const outcome = await tryCandidate(req, { ...freed, isLast: true, tried, ...opts });
      if (outcome.step !== "next") return ended(outcome, { req, chain });
      failed = outcome;
    }
  }
  return failed ? exhausted(failed, { chain, deps }) : slotsFull(deps);
}

/**
 * The loop's end after its last candidate (no race, none full): what the loop below would come
 * to with that outcome as its last.
 */
function lastEnded(
  outcome: Outcome,
  opts: { req: ForwardRequest; chain: Chain; deps: ForwardDeps },
): GatewayError | null {
  if (outcome.step !== "next") return ended(outcome, opts);
  return stopReason(opts.req.live.signal) ?? exhausted(outcome, opts);
}

/**
 * A candidate that ended the request: no error when it answered; the
 * request's own stop told as it is (the row says "client disconnected",
 * nothing more); anything else with the candidates tried.
 */
function ended(outcome: Outcome, opts: { req: ForwardRequest; chain: Chain }): GatewayError | null {
  if (outcome.step === "done") return null;
  return stopReason(opts.req.live.signal) ?? outcome.error.with(opts.chain);
}

/** The candidates to try, and why any was passed over as unable to take the request. */
function planFor(
  req: ForwardRequest,
  deps: ForwardDeps,
): { plan: Candidate[]; skipped: ReadonlyMap<string, string[]> } {
  // By upstream id, in plan order: the error names each candidate passed over. Made at the first
  // one passed over: most requests pass over none.
  let skipped: Map<string, string[]> | null = null;
  const sessionId = affinitySession(req.live.record);
  // Where the session's cache is warm as it arrives: a hop sent elsewhere records it
  // (docs/observability.md "Cache-aware affinity"). A resume's pass keeps the first answer.
  if (req.live.warmUpstream === undefined) {
    req.live.planned(deps.affinity.get(req.route.model, sessionId) ?? null);
  }
  const plan = planCandidates(req.route, {
    deps,
    sessionId,
    only: req.only,
    // A candidate that cannot be sent the request is passed over, not tried:
    // no attempt row, no cooldown charge, no place in "tried".
    accept: (target) => {
      const { upstream } = target;
      if (req.pin !== undefined && upstream.id !== req.pin) {
        (skipped ??= new Map()).set(upstream.id, [notHome(req)]);
        return false;
      }
      const missing = inexpressible(req, { kind: upstream.kind, deps, target });
      if (missing.length) (skipped ??= new Map()).set(upstream.id, missing);
      return missing.length === 0;
    },
  });
  return { plan, skipped: skipped ?? NONE_SKIPPED };
}

const NONE_SKIPPED: ReadonlyMap<string, string[]> = new Map();

/**
 * One candidate, retried while the verdict says `retry` and retries last
 * (`retryWait`). Each hop's end is settled here, the one place (settle.ts), a crashed hop's
 * too. It never throws: the candidate's work in a hedge race's lane is this, and a crash
 * outside any hop (nothing to settle) ends the request as the loop's own failure.
 */
function tryCandidate(req: ForwardRequest, opts: CandidateOpts): Promise<Outcome> {
  const tries = new CandidateTries(req, opts);
  try {
    return tries.hop(opts.release);
  } catch (err) {
    return Promise.resolve(tries.crashed(err));
  }
}

/**
 * A candidate's hops, one after another. Not an async function awaiting each hop: a held
 * stream would keep that frame suspended for its whole life (its registers alone were ~400 B);
 * a hop's end is taken by a reaction on the hop's promise instead, and only the wait between
 * two hops (the backoff, a slot) is an async frame (docs/performance_log.md "One object per
 * held stream"). Nothing here throws: a crash becomes the loop's own failure (`crashed`).
 */
class CandidateTries {
  #retry = 0;
  readonly #signal: AbortSignal;
  readonly #retries: number;

  constructor(readonly req: ForwardRequest, readonly opts: CandidateOpts) {
    this.#signal = opts.lane?.signal ?? req.live.signal;
    this.#retries = opts.deps.config.failover.retries_per_candidate;
  }

  /** One hop holding `release`'s slot, and what its end comes to. */
  hop(release: () => void): Promise<Outcome> {
    const { req, opts } = this;
    const { target } = opts;
    if (opts.tried.at(-1) !== target.upstream.id) opts.tried.push(target.upstream.id);
    const hop = new Hop(req, {
      target,
      deps: opts.deps,
      release,
      signal: this.#signal,
      gate: opts.lane ?? undefined,
      probe: opts.probe ?? undefined,
    });
    // A retry still to come could answer too: until then this hop is not the last word.
    const isLast = opts.isLast && this.#retry >= this.#retries;
    let running: Promise<HopEnding>;
    try {
      running = opts.runHop(hop, { isLast });
    } catch (err) {
      running = Promise.reject(err);
    }
    return running.then(
      (ending) => this.#settle(hop, ending, null),
      (err: unknown) => this.#settle(hop, null, err),
    );
  }

  /** A hop's end, `ending` or what it threw (read as how it ended: hop_ending.ts), settled. */
  #settle(hop: Hop, ending: HopEnding | null, thrown: unknown): Outcome | Promise<Outcome> {
    try {
      const settled = settle(hop, closeHop(hop, ending ?? hop.endingOf(thrown)));
      this.opts.onSettled?.(hop, settled);
      if (settled.step !== "retry") return settled;
      const wait = retryWait(this.#retry, {
        retries: this.#retries,
        retryAfterSecs: settled.error.retryAfterSecs,
      });
      if (wait === null) return { ...settled, step: "next" };
      return this.#again(wait, settled.error);
    } catch (err) {
      return this.crashed(err);
    }
  }

  /** The backoff, then a slot, then the next hop (whose promise is returned, not awaited). */
  async #again(waitSecs: number, error: GatewayError): Promise<Outcome> {
    const { req, opts } = this;
    const { deps, target } = opts;
    const signal = this.#signal;
    try {
      try {
        await deps.clock.sleep(waitSecs * 1000, signal);
      } catch {
        return { step: "stop", error: this.#stopped() ?? error, resumable: false };
      }
      this.#retry++;
      const release = await takeSlot(target, { req, deps, wait: true, signal });
      if (!release) {
        return { step: "stop", error: this.#stopped() ?? slotsFull(deps), resumable: false };
      }
      return this.hop(release);
    } catch (err) {
      return this.crashed(err);
    }
  }

  #stopped(): GatewayError | undefined {
    return stopReason(this.req.live.signal) ?? stopReason(this.#signal);
  }

  /** A crash outside any hop: the loop's own failure, logged. */
  crashed(err: unknown): Outcome {
    this.opts.deps.log.event("gateway.internal_error", { error: String(err) });
    return { step: "stop", error: GatewayError.from(err), resumable: false };
  }
}

interface CandidateOpts extends LoopOpts {
  target: Candidate;
  release: () => void;
  isLast: boolean;
  tried: string[];
  /** Its lane in a hedge race: a lost race stops its retries too. */
  lane?: Lane | null;
  /** The probes of its half-open levels this request holds (docs/design.md "Cooldown"). */
  probe?: ProbeHold | null;
}

/**
 * Closes a hop that has ended: a crash of the gateway's own as it closes is the gateway's fault
 * (verdict `gateway_fault`), so even a crashed hop, in a hedge race's lane or not, goes to
 * settle like any other.
 */
function closeHop(hop: Hop, ending: HopEnding): HopEnding {
  try {
    hop.close();
  } catch (err) {
    return { how: "gateway_fault", error: GatewayError.from(err) };
  }
  return ending;
}

/**
 * The probes of a half-open candidate (its member's, its upstream's, or both): held for as long
 * as its hop may wait for a slot and then go without content, so a probe whose process died frees
 * them by then. Null when neither level is half-open after all.
 */
async function claimProbe(
  target: Candidate,
  opts: { req: ForwardRequest; deps: ForwardDeps },
): Promise<ProbeHold | "taken" | null> {
  const { req, deps } = opts;
  const { failover } = deps.config;
  const silentSecs = target.candidate.first_content_timeout_secs ??
    req.route.first_content_timeout_secs ?? failover.idle_timeout_secs;
  const secs = silentSecs + failover.slot_wait_secs;
  const tickets = await claimMemberProbes(deps.cooldowns, memberOf(target), {
    leaseMs: secs * 1000,
  });
  if (tickets === "taken") return "taken";
  return tickets.length ? new ProbeHold(tickets, { upstream: target.upstream.id, deps }) : null;
}

function isAffine(target: Candidate, req: ForwardRequest, deps: ForwardDeps): boolean {
  return deps.affinity.get(req.route.model, affinitySession(req.live.record)) ===
    target.upstream.id;
}

async function takeSlot(
  target: Candidate,
  opts: { req: ForwardRequest; deps: ForwardDeps; wait: boolean; signal?: AbortSignal },
): Promise<(() => void) | null> {
  const { deps, req } = opts;
  const max = target.upstream.max_in_flight;
  // Slots are shared fairly between keys (route/fair_share.ts).
  const key = req.live.record.keyId;
  const now = deps.slots.tryAcquire(target.upstream.id, max, { key });
  if (now || !opts.wait) return now;
  req.live.waitingForSlot();
  return await deps.slots.acquire(target.upstream.id, max, {
    waitMs: deps.config.failover.slot_wait_secs * 1000,
    signal: opts.signal ?? req.live.signal,
    key,
  });
}

/** Waits up to `slot_wait_secs` for the first of several full upstreams to free a slot. */
async function waitForAny(
  full: Candidate[],
  opts: { req: ForwardRequest; deps: ForwardDeps },
): Promise<{ target: Candidate; release: () => void } | null> {
  const { deps, req } = opts;
  req.live.waitingForSlot();
  const race = new AbortController();
  const stop = () => race.abort();
  req.live.signal.addEventListener("abort", stop, { once: true });
  try {
    const wins = await Promise.all(full.map(async (target) => {
      const release = await deps.slots.acquire(target.upstream.id, target.upstream.max_in_flight, {
        waitMs: deps.config.failover.slot_wait_secs * 1000,
        signal: race.signal,
        key: req.live.record.keyId,
      });
      if (release) race.abort();
      return release ? { target, release } : null;
    }));
    const [first, ...rest] = wins.filter((w) => w !== null);
    for (const extra of rest) extra?.release();
    return first ?? null;
  } finally {
    req.live.signal.removeEventListener("abort", stop);
  }
}

/**
 * No candidate of the route can be sent this request: the caller's 400, naming
 * what stood in the way per upstream kind and the kinds that could take it.
 */
function cannotExpress(
  req: ForwardRequest,
  opts: { skipped: ReadonlyMap<string, string[]>; deps: ForwardDeps },
): GatewayError {
  const kinds = Object.keys(opts.deps.adapters) as UpstreamKind[];
  const able = kinds.filter((kind) => !inexpressible(req, { kind, deps: opts.deps }).length);
  return clientError(
    `route '${req.route.model}' has no upstream that can take this request ` +
      `(${describeSkipped(opts.skipped)}); ` +
      `upstream kinds that can: ${able.join(", ")}`,
    { code: "gw.client.unsupported", param: req.ir.nativeOnly?.[0]?.param },
  );
}

function noCandidate(req: ForwardRequest): GatewayError {
  return new GatewayError(`route ${req.route.model} has no enabled candidate`, {
    code: "gw.upstream.unavailable",
  });
}

function slotsFull(deps: ForwardDeps): GatewayError {
  return new GatewayError("every candidate upstream is at its max_in_flight", {
    code: "gw.slots.full",
    retryAfterSecs: Math.max(1, Math.ceil(deps.config.failover.slot_wait_secs)),
  });
}

/**
 * No candidate is left (docs/design.md "Failover before content"): the last failure, with the
 * status its verdict's `final` column gives the client (`finalStatus` in verdict.ts).
 */
function exhausted(
  last: Failed<"next">,
  opts: { chain: Chain; deps: ForwardDeps },
): GatewayError {
  const timeoutStatus = opts.deps.config.failover.timeout_status;
  const status = finalStatus(last.final, last.error, { timeoutStatus });
  return last.error.with({ ...opts.chain, status });
}

/** The candidates tried, in order, and the text naming those passed over. */
interface Chain {
  tried: string[];
  skipped: string;
}
