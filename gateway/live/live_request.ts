import type {
  AttemptOutcome,
  AttemptRecord,
  RequestRecord,
  RequestTrace,
  UsageSource,
} from "../../db/records.ts";
import { newSpanId } from "./trace_context.ts";
import type { Clock } from "../runtime/clock.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import type { IrRequest, IrUsage } from "../formats/ir.ts";
import { checkUsage, cutCacheCounts, type UsageField } from "../formats/token_counts.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { type Billing, requestCost, sumPriced } from "./billing.ts";

export type LiveState =
  | "waiting_for_slot"
  | "waiting_for_headers"
  | "holding"
  | "streaming"
  | "finishing";

/** The metrics label of a request that never reached a configured route. */
export const UNKNOWN_ROUTE = "unknown";

/**
 * Where rows go; the history writer in production, an array in unit tests. A request hands over
 * its one record (and each hop its own) every time it changes, never a copy: the writer keeps
 * the record and stores it as it is when its batch is written (db/history_writer.ts), so a
 * request that ends within one batch is built once, from its final state.
 */
export interface HistorySink {
  /**
   * `expendable`: the row of a request that has not reached an upstream (and may be refused),
   * which the writer drops first when full and does not queue when full (docs/security.md
   * "Refused floods"). A hop written for the request makes its queued row real again.
   */
  writeRequest(r: RequestRecord, opts?: { expendable?: boolean }): void;
  writeAttempt(a: AttemptRecord): void;
}

/**
 * A request's place in its key's budget of recorded refusals (docs/security.md "Refused
 * floods"). `held` when it was admitted: its row is kept should it end before any upstream
 * call. `claim` tries for a place at that end when none was held then; `release` gives a held
 * place back once the request reaches an upstream.
 */
export interface RefusalSlot {
  readonly held: boolean;
  /** True when a place is held, taking one now if there is one left. */
  claim(): boolean;
  release(): void;
}

/**
 * How a request's row is written: `real` always (it reached an upstream, or is not under a
 * refusal budget), `expendable` (it may still end before any upstream call: dropped first when
 * the writer is full), or `unwritten` (its key's budget had no place when it was admitted: no
 * open row; written once it reaches an upstream, or at its end if a place is left then).
 */
type RowKind = "real" | "expendable" | "unwritten";

/** Ends of the caller's doing that are not the gateway refusing it: always recorded. */
const NOT_REFUSALS: ReadonlySet<string> = new Set(["gw.client.disconnected"]);

/**
 * Refusals of an operator's fence (docs/design.md "Abort and disconnect"): the operator's doing,
 * but a refusal of the caller's retries all the same, which a looping client could repeat
 * without end, so bounded by its key's budget like bad input.
 */
const FENCE_REFUSALS: ReadonlySet<string> = new Set(["gw.session.fenced", "gw.turn.fenced"]);

/**
 * Whether an end before any upstream call is the gateway refusing the caller (bad input,
 * unknown model, forbidden route, key limits, guardrails, a reused request id, a fence), which
 * its key's budget bounds; the gateway's, the config's or an operator's failures are always
 * recorded.
 */
function isRefusal(err: GatewayError | undefined): boolean {
  if (err === undefined) return false;
  return (err.source === "client" && !NOT_REFUSALS.has(err.code)) || FENCE_REFUSALS.has(err.code);
}

export interface LiveRequestInit {
  id: string;
  instanceId: string;
  clientFormat: string;
  route: string | null;
  stream: boolean;
  keyId: string | null;
  sessionId: string | null;
  /** The request's trace context (docs/observability.md "Traces"). */
  trace?: RequestTrace;
}

/** The token fields a hop's or a request's row takes from a usage report (IrUsage). */
type UsageFields = Pick<
  AttemptRecord,
  "inputTokens" | "outputTokens" | "cachedTokens" | "cacheWriteTokens" | "cacheWrite1hTokens"
>;

/**
 * A checked usage report onto a row: each field it states replaces the row's, the rest stay;
 * cache counts a later report left above the input are cut to it.
 */
function takeUsage(row: UsageFields & SourcedRow, usage: IrUsage): void {
  row.inputTokens = usage.inputTokens ?? row.inputTokens;
  row.outputTokens = usage.outputTokens ?? row.outputTokens;
  row.cachedTokens = usage.cachedTokens ?? row.cachedTokens;
  row.cacheWriteTokens = usage.cacheWriteTokens ?? row.cacheWriteTokens;
  row.cacheWrite1hTokens = usage.cacheWrite1hTokens ?? row.cacheWrite1hTokens;
  cutCacheCounts(row);
  if (row.inputTokens !== null || row.outputTokens !== null) row.usageSource ??= "upstream";
}

/** The fields that say where a row's tokens came from. */
type SourcedRow = { tokensEstimated: boolean; usageSource: UsageSource | null };

/**
 * The gateway's estimate now stands in a row's tokens (usage_ledger.ts): the row says so, and
 * keeps saying `rejected` where an out-of-range count is what the estimate replaced. Cache
 * counts stay parts of an estimated input.
 */
export function markEstimated(row: UsageFields & SourcedRow): void {
  cutCacheCounts(row);
  row.tokensEstimated = true;
  if (row.usageSource !== "rejected") row.usageSource = "estimated";
}

/** One hop in progress. Ends exactly once; later calls are ignored. */
export class Attempt {
  ended = false;
  contentSeen = false;
  /** Usage kept off the request's row until this hop may answer (a hedged hop: first_content_gate.ts). */
  #held: IrUsage[] | null = null;
  constructor(readonly record: AttemptRecord, private owner: LiveRequest) {}

  headers(status: number): void {
    this.record.status = status;
    this.record.headersMs = this.owner.clock.now() - this.record.startedAt;
    this.owner.flushAttempt(this);
  }

  /** The hop answers the client from here on: usage it held goes to the request's row. */
  firstContent(): void {
    if (this.contentSeen) return;
    this.contentSeen = true;
    this.record.firstContentMs = this.owner.clock.now() - this.record.startedAt;
    const held = this.#held ?? [];
    this.#held = null;
    for (const usage of held) this.owner.usage(usage);
  }

  /** Until its first content, the usage this hop reports stays on its own row. */
  holdUsage(): void {
    if (!this.contentSeen) this.#held ??= [];
  }

  /**
   * A usage report from this hop's upstream. Its counts are checked first, in place
   * (token_counts.ts): a refused one leaves the row to the usage ledger's estimate, the row says
   * `rejected`, and `pulsegate_usage_rejected_total` counts it.
   */
  usage(usage: IrUsage): void {
    const refused = checkUsage(usage);
    if (refused.length) this.refused(refused);
    takeUsage(this.record, usage);
    if (this.#held) this.#held.push(usage);
    else this.owner.usage(usage);
  }

  /** Counts of this hop's upstream that were out of range: the row and the metric say so. */
  refused(fields: readonly UsageField[]): void {
    this.record.usageSource = "rejected";
    for (const field of fields) {
      this.owner.deps.metrics.usageRejected.inc({ upstream: this.record.upstream, field });
    }
  }

  /** Whether an upstream count of this hop was refused: the ledger estimates in its place. */
  get usageRejected(): boolean {
    return this.record.usageSource === "rejected";
  }

  /** This hop answered the client and its tokens are partly estimated (usage_ledger.ts). */
  estimated(): void {
    this.owner.estimated(this.record);
  }

  end(outcome: AttemptOutcome, err?: GatewayError): void {
    if (this.ended) return;
    this.ended = true;
    this.record.outcome = outcome;
    this.record.durationMs = this.owner.clock.now() - this.record.startedAt;
    if (err) {
      this.record.errorCode = err.code;
      this.record.errorMessage = err.message;
    }
    this.owner.attemptEnded(this);
  }
}

/**
 * Everything known about one request while it runs: its row, its hops, its
 * live state for the admin page, and its abort switch. `finish` writes the
 * row once, whatever path the request ends on.
 */
export class LiveRequest {
  readonly record: RequestRecord;
  readonly attempts: Attempt[] = [];
  readonly controller = new AbortController();
  state: LiveState = "waiting_for_headers";
  lastContentAt: number | null = null;
  /**
   * The route label of this request's metrics: set only once the model names a
   * configured route the key may use, so caller input never mints a series.
   */
  metricsRoute: string | null = null;
  /** Prices hops and meters the key; set once the request is admitted (docs/config.md). */
  billing: Billing | null = null;
  /**
   * The upstream the session was pinned to (its warm prompt cache) when its candidates were
   * first planned; null without a session or a pin, undefined until planned.
   */
  warmUpstream: string | null | undefined = undefined;
  /**
   * The request as the IR once its body is read: the turn a request abort fences against its
   * retry (gateway/live/fences.ts); null before.
   */
  conversation: IrRequest | null = null;
  #finished = false;
  #row: RowKind;

  /**
   * `expendable`: a refused request's row (already within its budget). `refusal`: an admitted
   * request's slot in its key's refusal budget; without one the row is always written.
   */
  constructor(
    init: LiveRequestInit,
    readonly deps: {
      clock: Clock;
      sink: HistorySink;
      metrics: Metrics;
      expendable?: boolean;
      refusal?: RefusalSlot;
    },
  ) {
    this.record = {
      ...init,
      state: "open",
      startedAt: deps.clock.now(),
      endedAt: null,
      status: null,
      outcome: null,
      failureSource: null,
      errorCode: null,
      errorMessage: null,
      upstream: null,
      upstreamModel: null,
      firstContentMs: null,
      durationMs: null,
      inputTokens: null,
      outputTokens: null,
      cachedTokens: null,
      reasoningTokens: null,
      tokensEstimated: false,
      usageSource: null,
      costUsd: null,
      cacheWriteTokens: null,
      cacheWrite1hTokens: null,
      cacheWriteUsd: null,
      movedFrom: null,
      toolServer: null,
      bytesIn: null,
      bytesOut: null,
    };
    const slot = deps.refusal;
    this.#row = slot === undefined
      ? deps.expendable ? "expendable" : "real"
      : slot.held
      ? "expendable"
      : "unwritten";
    if (this.#row !== "unwritten") {
      deps.sink.writeRequest(this.record, { expendable: this.#row === "expendable" });
    }
  }

  get clock(): Clock {
    return this.deps.clock;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get finished(): boolean {
    return this.#finished;
  }

  /**
   * A hop to `upstream`. `movedFrom`: the session's warm upstream, when this hop goes elsewhere
   * (docs/observability.md "Cache-aware affinity"); the request's row keeps the first.
   */
  startAttempt(upstream: string, model: string, opts: { movedFrom?: string } = {}): Attempt {
    const movedFrom = opts.movedFrom ?? null;
    const attempt = new Attempt({
      requestId: this.record.id,
      hop: this.attempts.length + 1,
      upstream,
      model,
      outcome: null,
      status: null,
      errorCode: null,
      errorMessage: null,
      startedAt: this.clock.now(),
      headersMs: null,
      firstContentMs: null,
      durationMs: null,
      inputTokens: null,
      outputTokens: null,
      tokensEstimated: false,
      usageSource: null,
      droppedHeaders: null,
      costUsd: null,
      resumeOffset: null,
      cachedTokens: null,
      cacheWriteTokens: null,
      cacheWrite1hTokens: null,
      cacheWriteUsd: null,
      movedFrom,
      trace: { spanId: newSpanId() },
    }, this);
    this.attempts.push(attempt);
    this.record.movedFrom ??= movedFrom;
    this.record.upstream = upstream;
    this.record.upstreamModel = model;
    this.state = "waiting_for_headers";
    if (this.#row !== "real") this.#reachedUpstream();
    this.flushAttempt(attempt);
    return attempt;
  }

  /**
   * Whether the row of a request ending before any upstream call is written. A refusal keeps
   * its place in the key's budget (taking one now if it held none); any other end is recorded
   * regardless and gives a held place back. Either row is expendable.
   */
  #keepsRow(err: GatewayError | undefined): boolean {
    const slot = this.deps.refusal;
    this.#row = "expendable";
    if (slot === undefined) return true;
    if (isRefusal(err)) return slot.claim();
    slot.release();
    return true;
  }

  /**
   * Its first hop: the row is real from now on and its refusal slot goes back. A queued
   * expendable row is made real by the hop written next (`HistorySink`); one never written
   * (the budget had no place) is written now.
   */
  #reachedUpstream(): void {
    if (this.#row === "unwritten") this.deps.sink.writeRequest(this.record);
    this.#row = "real";
    this.deps.refusal?.release();
  }

  flushAttempt(attempt: Attempt): void {
    this.deps.sink.writeAttempt(attempt.record);
  }

  attemptEnded(attempt: Attempt): void {
    const r = attempt.record;
    this.deps.metrics.attempts.inc({ upstream: r.upstream, outcome: r.outcome ?? "error" });
    this.billing?.bill(r);
    if (r.costUsd) {
      const route = this.metricsRoute ?? UNKNOWN_ROUTE;
      this.deps.metrics.cost.inc({ route, upstream: r.upstream }, r.costUsd);
    }
    this.flushAttempt(attempt);
  }

  /**
   * Usage for the request's row, already checked: by its hop (`Attempt.usage`), or merged by a
   * resume from frames their hop checked first (stream_pump.ts).
   */
  usage(usage: IrUsage): void {
    takeUsage(this.record, usage);
    this.record.reasoningTokens = usage.reasoningTokens ?? this.record.reasoningTokens;
  }

  /** The answering hop's tokens were estimated: the request's row says so, with at least as many. */
  estimated(a: AttemptRecord): void {
    const r = this.record;
    r.inputTokens ??= a.inputTokens;
    r.outputTokens = Math.max(r.outputTokens ?? 0, a.outputTokens ?? 0);
    markEstimated(r);
  }

  /** The first content went to the client. */
  contentSent(): void {
    const now = this.clock.now();
    this.lastContentAt = now;
    this.state = "streaming";
    if (this.record.firstContentMs !== null) return;
    this.record.firstContentMs = now - this.record.startedAt;
    this.deps.metrics.firstContent.observe(
      { route: this.metricsRoute ?? UNKNOWN_ROUTE },
      this.clock.elapsed(this.record.startedAt, now) / 1000,
    );
  }

  /** Writes the row and counts the request; the first call wins. */
  finish(result: { status: number; error?: GatewayError }): void {
    if (this.#finished) return;
    this.#finished = true;
    const r = this.record;
    const err = result.error;
    r.state = "closed";
    r.endedAt = this.clock.now();
    r.durationMs = r.endedAt - r.startedAt;
    r.status = result.status;
    r.outcome = err ? "error" : "success";
    r.failureSource = err?.source ?? null;
    r.errorCode = err?.code ?? null;
    r.errorMessage = err ? err.recordedMessage : null;
    if (this.attempts.some((a) => a.usageRejected)) r.usageSource = "rejected";
    r.costUsd = requestCost(this.attempts.map((a) => a.record));
    r.cacheWriteUsd = sumPriced(this.attempts.map((a) => a.record.cacheWriteUsd));
    const { metrics } = this.deps;
    const route = this.metricsRoute ?? UNKNOWN_ROUTE;
    metrics.requests.inc({ route, outcome: r.outcome });
    metrics.duration.observe({ route }, this.clock.elapsed(r.startedAt, r.endedAt) / 1000);
    for (const a of this.attempts) {
      const upstream = a.record.upstream;
      if (a.record.inputTokens) {
        metrics.tokens.inc({ upstream, direction: "input" }, a.record.inputTokens);
      }
      if (a.record.outputTokens) {
        metrics.tokens.inc({ upstream, direction: "output" }, a.record.outputTokens);
      }
      countCacheTokens(metrics, a.record);
    }
    if (this.#row !== "real" && !this.#keepsRow(err)) {
      // Refused before any upstream call beyond its key's budget: answered, counted, no row.
      metrics.keyRefusalsUnrecorded.inc();
      return;
    }
    this.deps.sink.writeRequest(r, { expendable: this.#row === "expendable" });
  }
}

/**
 * `pulsegate_cache_tokens_total{upstream,op}`: a hop's cache reads and its writes by lifetime
 * (docs/observability.md "Cache tokens"); each is also counted in its input tokens.
 */
function countCacheTokens(metrics: Metrics, a: AttemptRecord): void {
  const upstream = a.upstream;
  const written = a.cacheWriteTokens ?? 0;
  const oneHour = Math.min(a.cacheWrite1hTokens ?? 0, written);
  if (a.cachedTokens) metrics.cacheTokens.inc({ upstream, op: "read" }, a.cachedTokens);
  if (written > oneHour) metrics.cacheTokens.inc({ upstream, op: "write_5m" }, written - oneHour);
  if (oneHour) metrics.cacheTokens.inc({ upstream, op: "write_1h" }, oneHour);
}
