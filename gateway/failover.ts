import { inexpressible, planCandidates } from "./candidates.ts";
import type { UpstreamKind } from "./format.ts";
import { clientError, GatewayError } from "./gateway_error.ts";
import {
  type Candidate,
  type ForwardDeps,
  type ForwardRequest,
  Hop,
  type HopResult,
} from "./hop.ts";
import { stopReason } from "./stop_reasons.ts";

/** The backoff before retrying the same candidate, in configured seconds. */
const RETRY_BACKOFF_SECS = 0.5;
/** A Retry-After longer than this is not waited out: the next candidate is tried. */
const MAX_RETRY_WAIT_SECS = 10;

export type RunHop = (hop: Hop, opts: { isLast: boolean }) => Promise<HopResult>;

/**
 * The candidate loop of SPEC §6: each candidate is tried (and retried on
 * retryable failures) until one answers or the request is stopped. Answers
 * the error to give the client, or null when a hop delivered the answer.
 */
export async function runCandidates(
  req: ForwardRequest,
  opts: { deps: ForwardDeps; runHop: RunHop },
): Promise<GatewayError | null> {
  const { deps, runHop } = opts;
  const { live } = req;
  const skipped = new Map<UpstreamKind, string[]>();
  const plan = planCandidates(req.route, {
    deps,
    sessionId: live.record.sessionId,
    // A candidate that cannot be sent the request is passed over, not tried:
    // no attempt row, no cooldown charge, no place in "tried".
    accept: ({ upstream }) => {
      const missing = inexpressible(req, { kind: upstream.kind, deps });
      if (missing.length) skipped.set(upstream.kind, missing);
      return missing.length === 0;
    },
  });
  if (!plan.length && skipped.size) return cannotExpress(req, { skipped, deps });
  const tried: string[] = [];
  let lastError: GatewayError | null = null;
  let waited = false;
  const full: Candidate[] = [];
  // Every other candidate was full: wait for one of them (SPEC §6 slots).
  // Undefined when none freed in time.
  const lastChance = async (): Promise<GatewayError | null | undefined> => {
    waited = true;
    const next = await waitForAny(full, { req, deps });
    if (!next) return undefined;
    const last = await tryCandidate(req, { ...next, deps, runHop, isLast: true, tried });
    return last === null ? null : exhausted(last, { tried, deps });
  };
  for (let i = 0; i < plan.length; i++) {
    const target = plan[i]!;
    const isLast = i === plan.length - 1 && (full.length === 0 || waited);
    const release = await takeSlot(target, { req, deps, wait: isAffine(target, req, deps) });
    if (!release) {
      if (stopReason(live.signal)) return stopReason(live.signal)!;
      full.push(target);
      continue;
    }
    const result = await tryCandidate(req, { target, release, deps, runHop, isLast, tried });
    if (result === null) return null;
    lastError = result;
    // The request itself was stopped (abort, disconnect, shutdown): that is the whole story.
    if (stopReason(live.signal)) return stopReason(live.signal)!;
    if (result.source === "client" || result.source === "aborted") {
      return result.withTried(tried);
    }
    if (i === plan.length - 1 && full.length && !waited) {
      const outcome = await lastChance();
      if (outcome !== undefined) return outcome;
    }
  }
  if (lastError) return exhausted(lastError, { tried, deps });
  if (stopReason(live.signal)) return stopReason(live.signal)!;
  if (full.length && !waited) {
    const outcome = await lastChance();
    return outcome !== undefined ? outcome : stopReason(live.signal) ?? slotsFull(deps);
  }
  return new GatewayError(`route ${req.route.model} has no enabled candidate`, {
    code: "gw.upstream.unavailable",
    source: "config",
    status: 503,
  });
}

async function tryCandidate(
  req: ForwardRequest,
  opts: {
    target: Candidate;
    release: () => void;
    deps: ForwardDeps;
    runHop: RunHop;
    isLast: boolean;
    tried: string[];
  },
): Promise<GatewayError | null> {
  const { target, deps } = opts;
  let release: (() => void) | null = opts.release;
  for (let retry = 0;; retry++) {
    if (!release) {
      release = await takeSlot(target, { req, deps, wait: true });
      if (!release) return stopReason(req.live.signal) ?? slotsFull(deps);
    }
    if (opts.tried.at(-1) !== target.upstream.id) opts.tried.push(target.upstream.id);
    const hop = new Hop(req, { target, deps, release });
    let result: HopResult;
    try {
      result = await opts.runHop(hop, { isLast: opts.isLast });
    } catch (err) {
      result = hop.thrown(err);
    } finally {
      hop.close();
      release = null;
    }
    if (result.kind === "done") return null;
    if (result.kind !== "retry" || retry >= deps.config.failover.retries_per_candidate) {
      return result.error;
    }
    const wait = result.delaySecs ?? RETRY_BACKOFF_SECS * 2 ** retry;
    if (wait > MAX_RETRY_WAIT_SECS) return result.error;
    try {
      await deps.clock.sleep(wait * 1000, req.live.signal);
    } catch {
      return stopReason(req.live.signal) ?? result.error;
    }
  }
}

function isAffine(target: Candidate, req: ForwardRequest, deps: ForwardDeps): boolean {
  return deps.affinity.get(req.route.model, req.live.record.sessionId) === target.upstream.id;
}

async function takeSlot(
  target: Candidate,
  opts: { req: ForwardRequest; deps: ForwardDeps; wait: boolean },
): Promise<(() => void) | null> {
  const { deps, req } = opts;
  const max = target.upstream.max_in_flight;
  const now = deps.slots.tryAcquire(target.upstream.id, max);
  if (now || !opts.wait) return now;
  req.live.state = "waiting_for_slot";
  return await deps.slots.acquire(target.upstream.id, max, {
    waitMs: deps.config.failover.slot_wait_secs * 1000,
    signal: req.live.signal,
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
  opts: { skipped: Map<UpstreamKind, string[]>; deps: ForwardDeps },
): GatewayError {
  const kinds = Object.keys(opts.deps.adapters) as UpstreamKind[];
  const able = kinds.filter((kind) => !inexpressible(req, { kind, deps: opts.deps }).length);
  const why = [...opts.skipped].map(([kind, missing]) => `${kind}: ${missing.join(", ")}`);
  return clientError(
    `route '${req.route.model}' has no upstream that can take this request (${why.join("; ")}); ` +
      `upstream kinds that can: ${able.join(", ")}`,
    { code: "gw.client.unsupported", param: req.ir.nativeOnly?.[0]?.param },
  );
}

function slotsFull(deps: ForwardDeps): GatewayError {
  return new GatewayError("every candidate upstream is at its max_in_flight", {
    code: "gw.slots.full",
    source: "gateway",
    status: 429,
    retryAfterSecs: Math.max(1, Math.ceil(deps.config.failover.slot_wait_secs)),
  });
}

/**
 * No candidate is left (SPEC §6): `timeout_status` in the client's format,
 * except when every upstream asked us to slow down, which stays a 429.
 */
function exhausted(last: GatewayError, opts: { tried: string[]; deps: ForwardDeps }): GatewayError {
  if (last.source === "client" || last.source === "aborted") return last.withTried(opts.tried);
  if (last.code === "gw.upstream.rate_limited") return last.withTried(opts.tried);
  if (last.code === "gw.client.disconnected" || last.code === "gw.slots.full") return last;
  return new GatewayError(last.message, {
    code: last.code,
    source: last.source,
    status: opts.deps.config.failover.timeout_status,
    tried: opts.tried,
    upstreamType: last.upstreamType,
  });
}
