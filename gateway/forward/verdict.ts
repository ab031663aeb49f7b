import type { AttemptOutcome } from "../../db/records.ts";
import type { Charge } from "../route/cooldown_levels.ts";

/**
 * How a hop ended, in the hop's own words: what the upstream did, or why we
 * stopped it. The hop, the stream pump and the whole-answer reader only say
 * this (hop_ending.ts); what happens next is decided once, by the table below.
 */
export type How =
  /** It finished its answer. */
  | "answered"
  /** It answered the caller's own 4xx (not 401/403/408/429). */
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
  /** It answered another error status: our credentials (401/403), 408, 501, ... */
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
  /** A break after content that mid-stream resume may mend (docs/liveness.md). */
  resumable?: true;
}

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
const CHARGED_NEXT: Verdict = { step: "next", outcome: "error", cooldown: "both" };
const SILENT: Verdict = {
  step: "next",
  outcome: "idle_timeout",
  cooldown: "both",
  dropsAffinity: true,
  idle: "before_content",
};
/** A refusal that is the caller's to read, unless it is a continuation's or the prompt's length. */
const CALLERS: Row = {
  before: { step: "stop", outcome: "error" },
  after: { step: "stop", outcome: "error" },
  resuming: { step: "next", outcome: "error" },
  overflow: { step: "next" },
};

/**
 * The one table of docs/design.md "Failover before content" and "After
 * content": how a hop ended × where the request stood → what happens next,
 * the attempt's outcome, and what it costs the upstream. Everything after
 * content is `stop` or `done`, so a started answer is never handed to another
 * candidate (tests/verdict_test.ts checks every cell).
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
    before: { step: "next", outcome: "error", cooldown: "member" },
    after: { step: "stop", outcome: "error" },
  },
  // Rate limits are mostly per model: the Retry-After pauses the member; counted for both.
  rate_limited: {
    before: { step: "retry", outcome: "error", cooldown: "both", pause: "retry_after" },
    after: BROKE_OFF,
    probing: PROBE_NOT_RETRIED,
  },
  overloaded: {
    before: { step: "retry", outcome: "error", cooldown: "both" },
    after: BROKE_OFF,
    probing: PROBE_NOT_RETRIED,
  },
  refused: { before: CHARGED_NEXT, after: BROKE_OFF },
  // Nothing of the model is in a connection that fails: the upstream as a whole is charged.
  connection: {
    before: { step: "retry", outcome: "error", cooldown: "upstream" },
    after: BROKE_OFF,
    probing: PROBE_NOT_RETRIED,
  },
  // A context-length refusal is not a health fault, in a stream or as a status.
  stream_error: { before: CHARGED_NEXT, after: BROKE_OFF, overflow: { cooldown: undefined } },
  bad_response: { before: CHARGED_NEXT, after: BROKE_OFF },
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
    before: { step: "next", outcome: "error" },
    after: { step: "stop", outcome: "error" },
  },
  aborted: stopped("aborted"),
  client_gone: stopped("client_disconnected"),
  shutdown: stopped("aborted"),
  hedge_lost: stopped("hedge_lost"),
  // Another answer, not a fault: uncharged, and the next candidate may replay. Only a replay
  // diverges, and only before its content reaches the client (after it nothing is compared).
  replay_diverged: {
    before: { step: "next", outcome: "replay_diverged" },
    after: { step: "stop", outcome: "replay_diverged" },
  },
};

/** The verdict for one hop: its row's column for the place, with an overflow's or a probe's changes. */
export function verdictFor(how: How, place: Place): Verdict {
  const row = VERDICTS[how];
  if (place.content) return (place.resuming && row.resumed) || row.after;
  const verdict = (place.resuming && row.resuming) || row.before;
  const moved = place.overflow && row.overflow ? { ...verdict, ...row.overflow } : verdict;
  return place.probing && row.probing ? { ...moved, ...row.probing } : moved;
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
