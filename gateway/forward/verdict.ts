import type { AttemptOutcome } from "../../db/records.ts";
import type { Charge } from "../route/cooldown_levels.ts";
import type { GatewayError, StatusSort } from "../runtime/gateway_error.ts";
import { isContextOverflow } from "../formats/context_overflow.ts";
import { isModelMissing } from "../formats/model_missing.ts";

/**
 * How a hop ended, in the hop's own words: what the upstream did, or why we
 * stopped it. The hop, the stream pump and the whole-answer reader only say
 * this (hop_ending.ts); what happens next is decided once, by the table below.
 */
export type How =
  /** It finished its answer. */
  | "answered"
  /** It answered the caller's own 4xx (not 401/403/408/429): `STATUS_ENDINGS` below. */
  | "rejected"
  /**
   * It answered that the model it was sent is not there (formats/model_missing.ts): the
   * member's fault, not the caller's (the model was the operator's choice).
   */
  | "model_missing"
  /** It answered 429. */
  | "rate_limited"
  /** It answered 500, 502, 503, 504 or 529. */
  | "overloaded"
  /** It answered another error status: our credentials (401/403), its own timeout (408), 501, ... */
  | "refused"
  /** The connection failed: refused, reset, or broken off while the body came. */
  | "connection"
  /** Its stream carried an error: an error event, or a frame the gateway cannot read. */
  | "stream_error"
  /** Its answer is one the gateway cannot read: not the format, empty, over a cap. */
  | "bad_response"
  /** Its body ended before the answer did (no content at all, or no finish reason). */
  | "unfinished"
  /** It went silent past the idle timeout. */
  | "idle_timeout"
  /** It sent no first content within `first_content_timeout_secs`. */
  | "first_content_timeout"
  /** A whole answer missed `whole_answer_deadline`. */
  | "deadline"
  /** Translating the request for it found the caller's input malformed. */
  | "caller_input"
  /**
   * The gateway failed at its own part of the call (building it threw): nothing reached the
   * upstream, so nothing is its fault (docs/design.md "Failover before content").
   */
  | "gateway_fault"
  /** The request was aborted by an operator. */
  | "aborted"
  /** The client went away. */
  | "client_gone"
  /** The gateway is shutting down. */
  | "shutdown"
  /** Another hedged hop reached its first content first. */
  | "hedge_lost"
  /**
   * A replaying hop's answer parted from what the client already has before matching all of it
   * (docs/liveness.md, "Replay"): nothing of it went out.
   */
  | "replay_diverged";

/**
 * What happens after a hop: `done` (it answered), `retry` (the same candidate
 * again, see `retryOrNext`), `next` (the next candidate), `stop` (the request
 * ends with this hop's error).
 */
export type Step = "done" | "retry" | "next" | "stop";

export interface Verdict {
  step: Step;
  /** The attempt row's outcome. */
  outcome: AttemptOutcome;
  /**
   * Charged to cooldown (docs/design.md "Cooldown"), and to whose: the member (upstream and
   * model) alone, the upstream as a whole, or both (route/cooldown_levels.ts says why each).
   */
  cooldown?: Charge;
  /** The answer's Retry-After pauses the member for that long. */
  pause?: "retry_after";
  /** The session's pin to this upstream is dropped for the turn. */
  dropsAffinity?: true;
  /** Counted (and logged) as an idle timeout in this phase. */
  idle?: "before_content" | "mid_stream";
  /**
   * A break after content that mid-stream resume mends (docs/liveness.md): the resume pass's
   * trigger, read from here alone (resume_pass.ts).
   */
  resumable?: true;
  /**
   * For `retry` and `next`: what the client is answered when this hop was the last word and no
   * candidate is left (docs/design.md "Failover before content"); `finalStatus` below.
   */
  final?: Final;
  /**
   * For `next`: which candidates the loop passes over from here on. `larger_window`: only one
   * with a known, larger `context_window` is worth the prompt, and never the same upstream and
   * model again (docs/liveness.md, route/context_overflow.ts applies it).
   */
  onward?: "larger_window";
}

/**
 * The status a client gets when no candidate is left:
 * - `timeout`: the route's `timeout_status` (504, or 503): no answer was had, and asking again
 *   may get one.
 * - `own`: the error's own status: what the upstream answered is the truth of whose fault it
 *   is, and asking again gets the same (a 429 with its Retry-After, a bad answer's 502, a
 *   missing model, a prompt too long for every window).
 * - `said`: a stream's error is `own` when it says one of those (a rate limit, a prompt too
 *   long, a model not there), else `timeout`.
 */
export type Final = "timeout" | "own" | "said";

/** Where the request stood when the hop ended. */
export interface Place {
  /** This hop's content reached the client (a whole answer: it was decoded). */
  content: boolean;
  /** This hop continues an answer another hop broke off (docs/liveness.md). */
  resuming: boolean;
  /**
   * The error is a context-length refusal and the route moves such a request
   * on to a larger window (`on_context_overflow: "next"`, docs/liveness.md).
   */
  overflow: boolean;
  /** This hop is the one probe of a member or upstream whose pause ended (docs/design.md "Cooldown"). */
  probing?: boolean;
  /**
   * The request itself was stopped as the hop ended (an operator's abort, the client gone, a
   * shutdown): a break then is nothing to resume.
   */
  stopped?: boolean;
}

interface Row {
  /** Before this hop's first content reached the client. */
  before: Verdict;
  /** After it: nothing else may be tried (docs/design.md "After content"). */
  after: Verdict;
  /** Before content, continuing a broken answer (else `before`): a refusal is not the caller's. */
  resuming?: Verdict;
  /** After content, continuing a broken answer (else `after`). */
  resumed?: Verdict;
  /** Changes before content when the refusal is of the prompt's length and the route moves on. */
  overflow?: Partial<Verdict>;
  /** Changes before content when the hop probed a half-open member or upstream. */
  probing?: Partial<Verdict>;
}

/** After content, a failure of the upstream's ends the stream (and may be resumed). */
const BROKE_OFF: Verdict = { step: "stop", outcome: "error", resumable: true };
/** The request itself stopped: said as it is, nothing charged, nothing resumed. */
const stopped = (outcome: AttemptOutcome): Row => ({
  before: { step: "stop", outcome },
  after: { step: "stop", outcome },
});
const ANSWERED: Verdict = { step: "done", outcome: "success" };
/**
 * A failed probe paused its member or upstream again (docs/design.md "Cooldown"): it is not
 * retried, or one probe would be two calls to a member just back.
 */
const PROBE_NOT_RETRIED: Partial<Verdict> = { step: "next" };
/** A fault that may be the model's or the whole upstream's: charged to both (the upstream's count is reset by any of its models' answers). */
const CHARGED_NEXT: Verdict = {
  step: "next",
  outcome: "error",
  cooldown: "both",
  final: "timeout",
};
const SILENT: Verdict = {
  step: "next",
  outcome: "idle_timeout",
  cooldown: "both",
  dropsAffinity: true,
  idle: "before_content",
  final: "timeout",
};
/**
 * A prompt too long for its candidate, on a route that moves it on (docs/liveness.md): only a
 * larger window is tried next, and with none left the caller reads the provider's refusal.
 */
const TO_LARGER_WINDOW: Partial<Verdict> = { step: "next", final: "own", onward: "larger_window" };
/** A refusal that is the caller's to read, unless it is a continuation's or the prompt's length. */
const CALLERS: Row = {
  before: { step: "stop", outcome: "error" },
  after: { step: "stop", outcome: "error" },
  resuming: { step: "next", outcome: "error", final: "timeout" },
  overflow: TO_LARGER_WINDOW,
};

/**
 * The one table of docs/design.md "Failover before content" and "After
 * content": how a hop ended × where the request stood → what happens next,
 * the attempt's outcome, and what it costs the upstream. Everything after
 * content is `stop` or `done`, so a started answer is never handed to another
 * candidate (verdict_test.ts beside this file checks every cell). `final` is the status the
 * client gets when no candidate is left; `STATUS_ENDINGS` below sorts an upstream's error status
 * into a row, and `probeEnd` gives a half-open probe back as its row says.
 */
export const VERDICTS: Readonly<Record<How, Row>> = {
  answered: {
    before: ANSWERED,
    after: ANSWERED,
    resumed: { step: "done", outcome: "resumed" },
  },
  rejected: CALLERS,
  // The model is the operator's, so not the caller's to read while another candidate may answer;
  // its member alone is charged, the upstream's other models are not to blame.
  model_missing: {
    before: { step: "next", outcome: "error", cooldown: "member", final: "own" },
    after: { step: "stop", outcome: "error" },
  },
  // Rate limits are mostly per model: the Retry-After pauses the member; counted for both.
  rate_limited: {
    before: {
      step: "retry",
      outcome: "error",
      cooldown: "both",
      pause: "retry_after",
      final: "own",
    },
    after: BROKE_OFF,
    probing: PROBE_NOT_RETRIED,
  },
  overloaded: {
    before: { step: "retry", outcome: "error", cooldown: "both", final: "timeout" },
    after: BROKE_OFF,
    probing: PROBE_NOT_RETRIED,
  },
  refused: { before: CHARGED_NEXT, after: BROKE_OFF },
  // Nothing of the model is in a connection that fails: the upstream as a whole is charged.
  connection: {
    before: { step: "retry", outcome: "error", cooldown: "upstream", final: "timeout" },
    after: BROKE_OFF,
    probing: PROBE_NOT_RETRIED,
  },
  // A context-length refusal is not a health fault, in a stream or as a status.
  stream_error: {
    before: { ...CHARGED_NEXT, final: "said" },
    after: BROKE_OFF,
    overflow: { ...TO_LARGER_WINDOW, cooldown: undefined },
  },
  // An answer that cannot be read is the upstream's fault, and asking again gets the same: with
  // no candidate left it is a 502, not a timeout a client would retry for ever.
  bad_response: { before: { ...CHARGED_NEXT, final: "own" }, after: BROKE_OFF },
  unfinished: { before: CHARGED_NEXT, after: BROKE_OFF },
  idle_timeout: {
    before: SILENT,
    after: { step: "stop", outcome: "idle_timeout", idle: "mid_stream", resumable: true },
  },
  first_content_timeout: {
    before: SILENT,
    after: { step: "stop", outcome: "idle_timeout", idle: "mid_stream", resumable: true },
  },
  deadline: { before: CHARGED_NEXT, after: { step: "stop", outcome: "error" } },
  caller_input: { ...CALLERS, overflow: undefined },
  // Never charged: one request the gateway cannot build must not pause an upstream for every key.
  gateway_fault: {
    before: { step: "next", outcome: "error", final: "timeout" },
    after: { step: "stop", outcome: "error" },
  },
  aborted: stopped("aborted"),
  client_gone: stopped("client_disconnected"),
  shutdown: stopped("aborted"),
  hedge_lost: stopped("hedge_lost"),
  // Another answer, not a fault: uncharged, and the next candidate may replay. Only a replay
  // diverges, and only before its content reaches the client (after it nothing is compared).
  replay_diverged: {
    before: { step: "next", outcome: "replay_diverged", final: "timeout" },
    after: { step: "stop", outcome: "replay_diverged" },
  },
};

/**
 * The verdict for one hop: its row's column for the place, with an overflow's or a probe's
 * changes; a request stopped itself resumes nothing.
 */
export function verdictFor(how: How, place: Place): Verdict {
  const row = VERDICTS[how];
  if (place.content) {
    const after = (place.resuming && row.resumed) || row.after;
    if (!place.stopped || !after.resumable) return after;
    const { resumable: _, ...kept } = after;
    return kept;
  }
  const verdict = (place.resuming && row.resuming) || row.before;
  const moved = place.overflow && row.overflow ? { ...verdict, ...row.overflow } : verdict;
  return place.probing && row.probing ? { ...moved, ...row.probing } : moved;
}

/**
 * How an upstream's error status ends its hop, by its sort (gateway/formats/upstream_status.ts):
 * the sort says what the status means, this says what the gateway makes of it. Retried on the
 * same candidate (docs/design.md "Failover before content"): a rate limit and an overload (500,
 * 502, 503, 504, 529). Failed over, charged: our credentials, any other failure, and a 408,
 * which is the upstream's own timeout of the call it was sent, never the caller's fault. Only
 * the caller's own 4xx is passed back, unless it says the model the hop sent is not there.
 */
export const STATUS_ENDINGS: Readonly<Record<StatusSort, Exclude<How, "answered">>> = {
  credentials: "refused",
  upstream_timeout: "refused",
  rate_limit: "rate_limited",
  overloaded: "overloaded",
  callers: "rejected",
  failed: "refused",
};

/** The status the client gets for `error`, the last word of a route with no candidate left. */
export function finalStatus(
  final: Final | undefined,
  error: GatewayError,
  opts: { timeoutStatus: number },
): number {
  const said = final === "said" && (error.code === "gw.upstream.rate_limited" ||
    isContextOverflow(error) || isModelMissing(error));
  return final === "own" || said ? error.status : opts.timeoutStatus;
}

/** How a half-open probe ended, as /metrics counts it (`result`); one never sent is not counted. */
export type ProbeEnd = "ok" | "failed" | "released" | "unsent";

/**
 * What ends a half-open probe (docs/design.md "Cooldown"), given back once (probe_hold.ts): its
 * first content closed its level; a failure the verdict charges to a level it probes paused that
 * again; any other end says nothing of its health and gives it back, and so does a probe the
 * loop never sent (no slot, the request stopped, a hedge race decided first). `verdict` is null
 * for a probe never sent; `reaches` says whether a charge lands on a level the probe holds.
 */
export function probeEnd(
  verdict: Verdict | null,
  opts: { content: boolean; reaches: (charge: Charge) => boolean },
): ProbeEnd {
  if (verdict === null) return "unsent";
  if (opts.content) return "ok";
  return verdict.cooldown && opts.reaches(verdict.cooldown) ? "failed" : "released";
}

/** The backoff before retrying the same candidate, in configured seconds; it doubles per retry. */
export const RETRY_BACKOFF_SECS = 0.5;
/** A Retry-After longer than this is not waited out: the next candidate is tried. */
export const MAX_RETRY_WAIT_SECS = 10;

/**
 * A `retry` goes to the same candidate while `retries_per_candidate` lasts,
 * after the upstream's Retry-After or the backoff, unless that wait is longer
 * than MAX_RETRY_WAIT_SECS; otherwise it is the next candidate's turn.
 * Answers the wait in configured seconds, or null for `next`.
 */
export function retryWait(
  retry: number,
  opts: { retries: number; retryAfterSecs?: number },
): number | null {
  if (retry >= opts.retries) return null;
  const wait = opts.retryAfterSecs ?? RETRY_BACKOFF_SECS * 2 ** retry;
  return wait > MAX_RETRY_WAIT_SECS ? null : wait;
}
