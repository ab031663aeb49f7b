import { movesOnOverflow } from "../route/context_overflow.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import { affinitySession } from "../route/affinity.ts";
import { firstContentSecs } from "./first_content_timer.ts";
import type { Hop } from "./hop.ts";
import type { HopEnding } from "./hop_ending.ts";
import { type Final, probeEnd, type Step, type Verdict, verdictFor } from "./verdict.ts";
import { stopReason } from "./stop_reasons.ts";
import { answerIsStored } from "../route/interaction_pin.ts";
import { memberOf } from "../route/candidates.ts";
import { cooldownKey } from "../route/cooldown.ts";
import {
  type Charge,
  chargeFailure,
  chargeReaches,
  chargeSuccess,
} from "../route/cooldown_levels.ts";

/** What the candidate loop does after a hop, with the hop's error. */
export type Settled = Answered | Failed<Exclude<Step, "done">>;
export interface Answered {
  step: "done";
  error?: undefined;
  resumable?: undefined;
}
/** One member per step, so a check of `step` narrows. */
export type Failed<S extends Step> = S extends Step ? {
    step: S;
    error: GatewayError;
    /** A break after content that mid-stream resume mends: the verdict's, as it is. */
    resumable: boolean;
    /** The status the client gets if this is the route's last word (verdict.ts `finalStatus`). */
    final?: Final;
    /** Which candidates the loop passes over from here on (verdict.ts). */
    onward?: Verdict["onward"];
  }
  : never;

/**
 * The one place a hop's end takes effect: its attempt row (outcome, error,
 * the tokens it billed), the member's and upstream's cooldown, the session's affinity and
 * the idle-timeout count, each as verdict.ts says for how it ended and where
 * the request stood.
 */
export function settle(hop: Hop, ending: HopEnding): Settled {
  const { error } = ending;
  const { route, resumeAt } = hop.req;
  const content = hop.attempt.contentSeen;
  const { probe } = hop.opts;
  const verdict = verdictFor(ending.how, {
    content,
    resuming: resumeAt !== undefined,
    overflow: error !== undefined && movesOnOverflow(route, error),
    probing: probe !== undefined,
    stopped: stopReason(hop.req.live.signal) !== undefined,
  });
  const { cooldowns, affinity, metrics, log } = hop.opts.deps;
  const upstream = hop.upstream.id;
  const member = memberOf(hop.opts.target);
  if (verdict.idle) {
    metrics.idleTimeouts.inc({ upstream, phase: verdict.idle });
    const first = ending.how === "first_content_timeout";
    const secs = first ? firstContentSecs(hop) : hop.idleSecs;
    log.event(first ? "gw.upstream.first_content_timeout" : "gw.upstream.idle_timeout", {
      upstream,
      secs,
    });
  }
  hop.end(verdict.outcome, error);
  const charge = verdict.cooldown;
  if (charge) chargeFailure(cooldowns, member, { charge, code: error?.code });
  const retryAfter = error?.retryAfterSecs;
  if (verdict.pause === "retry_after" && retryAfter !== undefined) {
    cooldowns.pauseFor(cooldownKey(upstream, member.model), retryAfter);
  }
  if (verdict.dropsAffinity) {
    affinity.drop(route.model, { sessionId: affinitySession(hop.req.live.record), upstream });
  }
  // A member's fault says nothing of its upstream, whose probe the next request may take.
  const reaches = (c: Charge) => probe?.tickets.some((t) => chargeReaches(c, t)) === true;
  probe?.end(probeEnd(verdict, { content, reaches }));
  measure(hop, verdict);
  if (verdict.step === "done" || !error) return { step: "done" };
  const { final, onward } = verdict;
  return { step: verdict.step, error, resumable: verdict.resumable === true, final, onward };
}

/**
 * A hop's first content reached the client (or a whole answer was read): the
 * upstream is healthy, the session stays with it, and a stored answer is
 * known to live there.
 */
export function settleContent(hop: Hop): void {
  hop.attempt.firstContent();
  const { cooldowns, affinity, homes, metrics, clock } = hop.opts.deps;
  const { startedAt, firstContentMs } = hop.attempt.record;
  const ms = clock.elapsed(startedAt, startedAt + (firstContentMs ?? 0));
  metrics.upstreamFirstContent.observe({ upstream: hop.upstream.id }, ms / 1000);
  const slot = hop.opts.target.pool;
  slot?.state.firstContent(slot.member, ms);
  chargeSuccess(cooldowns, memberOf(hop.opts.target));
  affinity.set(hop.req.route.model, {
    sessionId: affinitySession(hop.req.live.record),
    upstream: hop.upstream.id,
  });
  // The client now has the answer's id: a later turn on it must come back here
  // (docs/interactions.md "Stored interactions").
  if (homes && hop.answerId && answerIsStored(hop.req, hop.upstream)) {
    homes.note(hop.req.live.record.keyId, hop.answerId, {
      upstream: hop.upstream.id,
      route: hop.req.route.model,
    });
  }
}

/**
 * What the hop tells of its upstream's speed (docs/design.md "Pools"): an answer's content
 * tokens per second after its first content, for /metrics and its pool; a charged failure
 * counts against a pool member's latency. Every hop into a pool counts in its share.
 */
function measure(hop: Hop, verdict: Verdict): void {
  const { metrics, clock } = hop.opts.deps;
  const record = hop.attempt.record;
  const slot = hop.opts.target.pool;
  const upstream = hop.upstream.id;
  if (slot) {
    slot.state.hop(slot.member);
    metrics.poolHops.inc({
      route: slot.state.route,
      pool: String(slot.state.index),
      upstream,
    });
  }
  if (verdict.cooldown && slot) {
    slot.state.failed(slot.member, clock.elapsed(record.startedAt));
  }
  if (verdict.outcome !== "success" || record.firstContentMs === null) return;
  const ms = clock.elapsed(
    record.startedAt + record.firstContentMs,
    record.startedAt + (record.durationMs ?? 0),
  );
  const tokens = record.outputTokens ?? 0;
  if (tokens < 2 || ms < 1) return; // a whole answer, or one token: no rate to tell
  metrics.upstreamContentRate.observe({ upstream }, tokens * 1000 / ms);
  slot?.state.answered(slot.member, { tokens, ms });
}
