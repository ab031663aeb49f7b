import { describeSkipped, inexpressible, planCandidates } from "../route/candidates.ts";
import { affinitySession } from "../route/affinity.ts";
import type { UpstreamKind } from "../formats/format.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import {
  type Candidate,
  type ForwardDeps,
  type ForwardRequest,
  Hop,
  type HopResult,
} from "./hop.ts";
import { stopReason } from "./stop_reasons.ts";
import { HedgeRace, type Outcome } from "./hedge_race.ts";
import type { Lane } from "./hedge_lane.ts";
import { ContextOverflow } from "../route/context_overflow.ts";
import { isContextOverflow } from "../formats/context_overflow.ts";

/** The backoff before retrying the same candidate, in configured seconds. */
const RETRY_BACKOFF_SECS = 0.5;
/** A Retry-After longer than this is not waited out: the next candidate is tried. */
const MAX_RETRY_WAIT_SECS = 10;

export type RunHop = (hop: Hop, opts: { isLast: boolean }) => Promise<HopResult>;

/**
 * The candidate loop of docs/design.md "Failover before content", in four steps: plan the candidates; try each
 * in order (with its retries); if some were full, wait once for the first of
 * them to free a slot and try it; then report. A hop's result reaches the loop
 * whole: `stop` ends the request there (a failure after content reached the
 * client, the caller's own error, an abort), so a started answer is never
 * handed to another candidate. Answers the error to give the client, or null
 * when a hop delivered the answer.
 *
 * A route that hedges (docs/liveness.md, "Hedged start") runs the same loop
 * through a race: a candidate silent for `hedge_after_secs` lets the loop go
 * on to the next one while it keeps running, and the first to send content
 * wins. Every hop the race started has ended before this returns.
 */
export async function runCandidates(
  req: ForwardRequest,
  opts: { deps: ForwardDeps; runHop: RunHop },
): Promise<GatewayError | null> {
  const { plan, skipped } = planFor(req, opts.deps);
  const race = HedgeRace.for(req, { deps: opts.deps, plan });
  try {
    return await tryInOrder(req, { ...opts, plan, skipped, race });
  } finally {
    await race?.settle();
  }
}

async function tryInOrder(
  req: ForwardRequest,
  opts: {
    deps: ForwardDeps;
    runHop: RunHop;
    plan: Candidate[];
    skipped: Map<string, string[]>;
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
  let failed: GatewayError | null = null;
  const overflow = new ContextOverflow(req.route);
  for (const [i, target] of plan.entries()) {
    if (overflow.skips(target)) continue;
    // A hedge never waits for a slot while another candidate runs: it is tried later if full.
    const wait = isAffine(target, req, deps) && !race?.running;
    const release = await takeSlot(target, { req, deps, wait });
    if (!release) {
      if (stopReason(live.signal)) return stopReason(live.signal)!;
      // The session's own upstream was already waited for, for as long as a wait may last.
      if (!wait) full.push(target);
      continue;
    }
    // A later full candidate may still be waited for, so this one is last only if none was full.
    const isLast = i === plan.length - 1 && !full.length;
    const start = (lane: Lane | null = null) =>
      tryCandidate(req, { ...opts, target, release, isLast, tried, lane });
    // Hedged: "hedge" means this candidate is still running, silent, and the next joins it.
    const more = i < plan.length - 1;
    const result = race ? await race.run(target, { start, release, more }) : await start();
    if (result === "hedge") continue;
    // A refusal is a `stop` when it is the HTTP answer, a `next` when it came inside a stream.
    const movesOn = result.kind !== "done" && overflow.movesOn(result.error, target);
    if (result.kind !== "next" && !movesOn) return ended(result, { req, chain });
    if (stopReason(live.signal)) return stopReason(live.signal)!;
    failed = result.error;
  }
  const rest = await race?.drain();
  if (rest && rest.kind !== "next") return ended(rest, { req, chain });
  if (rest) failed = rest.error;
  const waitable = full.filter((target) => !overflow.skips(target));
  if (waitable.length) {
    const freed = await waitForAny(waitable, { req, deps });
    if (stopReason(live.signal)) return stopReason(live.signal)!;
    if (freed) {
      const result = await tryCandidate(req, { ...freed, isLast: true, tried, ...opts });
      if (result.kind !== "next") return ended(result, { req, chain });
      failed = result.error;
    }
  }
  return failed ? exhausted(failed, { chain, deps }) : slotsFull(deps);
}

/**
 * A hop that ended the request: no error when it answered; the request's own
 * stop told as it is (the row says "client disconnected", nothing more);
 * anything else with the candidates tried.
 */
function ended(
  result: { kind: "done" } | { kind: "stop"; error: GatewayError },
  opts: { req: ForwardRequest; chain: Chain },
): GatewayError | null {
  if (result.kind === "done") return null;
  return stopReason(opts.req.live.signal) ?? result.error.with(opts.chain);
}

/** The candidates to try, and why any was passed over as unable to take the request. */
function planFor(
  req: ForwardRequest,
  deps: ForwardDeps,
): { plan: Candidate[]; skipped: Map<string, string[]> } {
  // By upstream id, in plan order: the error names each candidate passed over.
  const skipped = new Map<string, string[]>();
  const plan = planCandidates(req.route, {
    deps,
    sessionId: affinitySession(req.live.record),
    // A candidate that cannot be sent the request is passed over, not tried:
    // no attempt row, no cooldown charge, no place in "tried".
    accept: ({ upstream }) => {
      const missing = inexpressible(req, { kind: upstream.kind, deps });
      if (missing.length) skipped.set(upstream.id, missing);
      return missing.length === 0;
    },
  });
  return { plan, skipped };
}

/**
 * One candidate, retried on retryable failures before content. Answers the
 * last hop's result: only `done`, `next` or `stop` (a `retry` left over when
 * retries run out is a `next`).
 */
async function tryCandidate(
  req: ForwardRequest,
  opts: {
    target: Candidate;
    release: () => void;
    deps: ForwardDeps;
    runHop: RunHop;
    isLast: boolean;
    tried: string[];
    /** Its lane in a hedge race: a lost race stops its retries too. */
    lane?: Lane | null;
  },
): Promise<Outcome> {
  const { target, deps, lane } = opts;
  const signal = lane?.signal ?? req.live.signal;
  const stopped = () => stopReason(req.live.signal) ?? stopReason(signal);
  let release: (() => void) | null = opts.release;
  for (let retry = 0;; retry++) {
    if (!release) {
      release = await takeSlot(target, { req, deps, wait: true, signal });
      if (!release) return { kind: "stop", error: stopped() ?? slotsFull(deps) };
    }
    if (opts.tried.at(-1) !== target.upstream.id) opts.tried.push(target.upstream.id);
    const hop = new Hop(req, { target, deps, release, lane });
    let result: HopResult;
    try {
      // A retry still to come could answer too: until then this hop is not the last word.
      const isLast = opts.isLast && retry >= deps.config.failover.retries_per_candidate;
      result = await opts.runHop(hop, { isLast });
    } catch (err) {
      result = hop.thrown(err);
    } finally {
      hop.close();
      release = null;
    }
    if (result.kind !== "retry") return result;
    const wait = result.delaySecs ?? RETRY_BACKOFF_SECS * 2 ** retry;
    if (retry >= deps.config.failover.retries_per_candidate || wait > MAX_RETRY_WAIT_SECS) {
      return { kind: "next", error: result.error };
    }
    try {
      await deps.clock.sleep(wait * 1000, signal);
    } catch {
      return { kind: "stop", error: stopped() ?? result.error };
    }
  }
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
  req.live.state = "waiting_for_slot";
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
  req.live.state = "waiting_for_slot";
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
  opts: { skipped: Map<string, string[]>; deps: ForwardDeps },
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
 * No candidate is left (docs/design.md "Failover before content"): `timeout_status` in the client's format,
 * except when every upstream asked us to slow down, which stays a 429, and
 * when the last refused the prompt as too long for it (docs/liveness.md),
 * which is the caller's to read as the provider said it.
 */
function exhausted(last: GatewayError, opts: { chain: Chain; deps: ForwardDeps }): GatewayError {
  if (last.code === "gw.upstream.rate_limited" || isContextOverflow(last)) {
    return last.with(opts.chain);
  }
  return last.with({ ...opts.chain, status: opts.deps.config.failover.timeout_status });
}

/** The candidates tried, in order, and the text naming those passed over. */
interface Chain {
  tried: string[];
  skipped: string;
}
