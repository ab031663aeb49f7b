import { movesOnOverflow } from "../route/context_overflow.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import { affinitySession } from "../route/affinity.ts";
import { firstContentSecs } from "./first_content_timer.ts";
import type { Hop } from "./hop.ts";
import type { HopEnding } from "./hop_ending.ts";
import { type Step, verdictFor } from "./verdict.ts";
import { answerIsStored } from "../route/interaction_pin.ts";

/** What the candidate loop does after a hop, with the hop's error. */
export type Settled = Answered | Failed<Exclude<Step, "done">>;
export interface Answered {
  step: "done";
  error?: undefined;
}
/** One member per step, so a check of `step` narrows. */
export type Failed<S extends Step> = S extends Step ? {
    step: S;
    error: GatewayError;
    /** A break after content that mid-stream resume may mend. */
    resumable: boolean;
  }
  : never;

/**
 * The one place a hop's end takes effect: its attempt row (outcome, error,
 * the tokens it billed), the upstream's cooldown, the session's affinity and
 * the idle-timeout count, each as verdict.ts says for how it ended and where
 * the request stood.
 */
export function settle(hop: Hop, ending: HopEnding): Settled {
  const { error } = ending;
  const { route, resumeAt } = hop.req;
  const content = hop.attempt.contentSeen;
  const verdict = verdictFor(ending.how, {
    content,
    resuming: resumeAt !== undefined,
    overflow: error !== undefined && movesOnOverflow(route, error),
  });
  const { cooldowns, affinity, metrics, log } = hop.opts.deps;
  const upstream = hop.upstream.id;
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
  if (verdict.cooldown) cooldowns.failure(upstream, error?.code);
  const retryAfter = error?.retryAfterSecs;
  if (verdict.cooldown === "charge_and_pause" && retryAfter !== undefined) {
    cooldowns.pauseFor(upstream, retryAfter);
  }
  if (verdict.dropsAffinity) {
    affinity.drop(route.model, { sessionId: affinitySession(hop.req.live.record), upstream });
  }
  if (verdict.step === "done" || !error) return { step: "done" };
  return { step: verdict.step, error, resumable: verdict.resumable === true };
}

/**
 * A hop's first content reached the client (or a whole answer was read): the
 * upstream is healthy, the session stays with it, and a stored answer is
 * known to live there.
 */
export function settleContent(hop: Hop): void {
  hop.attempt.firstContent();
  const { cooldowns, affinity, homes } = hop.opts.deps;
  cooldowns.success(hop.upstream.id);
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
