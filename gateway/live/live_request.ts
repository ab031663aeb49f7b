import type {
  AttemptOutcome,
  AttemptRecord,
  AttemptTrace,
  RequestRecord,
  RequestTrace,
  UsageSource,
} from "../../db/records.ts";
import { newSpanId } from "./trace_context.ts";
import type { LiveEvent } from "./live_event.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { IrRequest, IrUsage } from "../formats/ir.ts";
import { checkUsage, cutCacheCounts, type UsageField } from "../formats/token_counts.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { type Billing, requestCost, sumPriced } from "./billing.ts";

export type { LiveEvent } from "./live_event.ts";

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

/** How a request ended for its client. */
export interface Settlement {
  status: number;
  error?: GatewayError;
}

/**
 * One hop in progress: a view of its part of the request's log. Its methods append events
 * (`LiveEvent`); its row is the fold of them. Ends exactly once; later ends are ignored.
 */
export class Attempt {
  #ended = false;
  #contentSeen = false;
  /** Usage kept off the request's row until this hop may answer (a hedged hop: first_content_gate.ts). */
  #held: IrUsage[] | null;
  readonly #record: AttemptRecord;
  constructor(
    record: AttemptRecord,
    private owner: LiveRequest,
    holdsUsage: boolean,
  ) {
    this.#record = record;
    this.#held = holdsUsage ? [] : null;
  }

  /** This hop's row, as the log has made it so far. */
  get record(): Readonly<AttemptRecord> {
    return this.#record;
  }

  get ended(): boolean {
    return this.#ended;
  }

  get contentSeen(): boolean {
    return this.#contentSeen;
  }

  get #hop(): number {
    return this.#record.hop;
  }

  /** The call went out: the headers it left out, its span's trace (upstream_trace.ts). */
  sent(opts: { droppedHeaders?: string | null; trace: AttemptTrace | null }): void {
    const droppedHeaders = opts.droppedHeaders ?? null;
    this.owner.append({ type: "sent", hop: this.#hop, droppedHeaders, trace: opts.trace });
  }

  headers(status: number): void {
    this.owner.append({ type: "headers", hop: this.#hop, status, at: this.owner.at() });
  }

  /** It won its hedge race: the request's upstream is this hop's. */
  claimed(): void {
    this.owner.append({ type: "claimed", hop: this.#hop });
  }

  /** The hop answers the client from here on: usage it held goes to the request's row. */
  firstContent(): void {
    if (this.#contentSeen) return;
    this.owner.append({ type: "first_content", hop: this.#hop, at: this.owner.at() });
  }

  /** Until its first content, the usage this hop reports stays on its own row. */
  holdUsage(): void {
    if (!this.#contentSeen && !this.#held) this.owner.append({ type: "hold", hop: this.#hop });
  }

  /**
   * A usage report from this hop's upstream. Its counts are checked first, in place
   * (token_counts.ts): a refused one leaves the row to the usage ledger's estimate, the row says
   * `rejected`, and `pulsegate_usage_rejected_total` counts it.
   */
  usage(usage: IrUsage): void {
    const rejected = checkUsage(usage);
    this.owner.append(
      rejected.length
        ? { type: "usage", hop: this.#hop, usage, rejected }
        : { type: "usage", hop: this.#hop, usage },
    );
  }

  /** Counts of this hop's upstream that were out of range: the row and the metric say so. */
  refused(fields: readonly UsageField[]): void {
    this.owner.append({ type: "refused", hop: this.#hop, fields });
  }

  /** Whether an upstream count of this hop was refused: the ledger estimates in its place. */
  get usageRejected(): boolean {
    return this.#record.usageSource === "rejected";
  }

  /**
   * The gateway's estimate of this hop's tokens (usage_ledger.ts); `answered`: the hop answered
   * the client, so the request's row takes it too.
   */
  estimate(opts: { input?: number; output?: number; answered: boolean }): void {
    this.owner.append({ type: "estimated", hop: this.#hop, ...opts });
  }

  end(outcome: AttemptOutcome, err?: GatewayError): void {
    if (this.#ended) return;
    const at = this.owner.at();
    this.owner.append(
      err ? { type: "ended", hop: this.#hop, outcome, error: err, at } : {
        type: "ended",
        hop: this.#hop,
        outcome,
        at,
      },
    );
  }

  /** The fold of one of this hop's events on its row; the request's row is the owner's part. */
  apply(e: LiveEvent, owner: LiveRequest): void {
    const r = this.#record;
    // The hop's times count from its own start.
    const since = r.startedAt - owner.record.startedAt;
    switch (e.type) {
      case "sent":
        r.droppedHeaders = e.droppedHeaders;
        if (e.trace) r.trace = e.trace;
        return;
      case "headers": {
        r.status = e.status;
        if (r.headersMs !== null) return;
        r.headersMs = e.at - since;
        owner.flushAttempt(this);
        return;
      }
      case "hold":
        this.#held ??= [];
        return;
      case "first_content": {
        this.#contentSeen = true;
        r.firstContentMs = e.at - since;
        const held = this.#held ?? [];
        this.#held = null;
        for (const usage of held) owner.takeUsage(usage);
        return;
      }
      case "usage":
        if (e.rejected) this.#rejected(e.rejected, owner);
        takeUsage(r, e.usage);
        if (this.#held) this.#held.push(e.usage);
        else owner.takeUsage(e.usage);
        return;
      case "refused":
        this.#rejected(e.fields, owner);
        return;
      case "estimated":
        if (e.input !== undefined) r.inputTokens ??= e.input;
        if (e.output !== undefined) r.outputTokens = Math.max(r.outputTokens ?? 0, e.output);
        markEstimated(r);
        if (e.answered) owner.estimated(r);
        return;
      case "ended":
        this.#ended = true;
        r.outcome = e.outcome;
        r.durationMs = e.at - since;
        if (e.error) {
          r.errorCode = e.error.code;
          r.errorMessage = e.error.message;
        }
        owner.attemptEnded(this, r);
        return;
    }
  }

  #rejected(fields: readonly UsageField[], owner: LiveRequest): void {
    this.#record.usageSource = "rejected";
    for (const field of fields) {
      owner.deps.metrics.usageRejected.inc({ upstream: this.#record.upstream, field });
    }
  }
}

/**
 * Everything known about one request while it runs: its log of events, the row they fold into,
 * its hops, its live state for the admin page, and its abort switch. Whatever appends an event
 * changes the record; nothing assigns it from outside. `finish` writes the row once, from the
 * request handler's one `finally` (gateway/accept/proxy.ts).
 */
export class LiveRequest {
  readonly #record: RequestRecord;
  readonly #attempts: Attempt[] = [];
  readonly #controller = new AbortController();
  /** The log: every event but a content frame's, which only moves `lastContentAt`. */
  readonly #events: LiveEvent[] = [];
  #state: LiveState = "waiting_for_headers";
  #lastContentAt: number | null = null;
  #metricsRoute: string | null = null;
  #billing: Billing | null = null;
  #warmUpstream: string | null | undefined = undefined;
  #conversation: IrRequest | null = null;
  #settled: Extract<LiveEvent, { type: "settled" }> | null = null;
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
    this.#record = {
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
      deps.sink.writeRequest(this.#record, { expendable: this.#row === "expendable" });
    }
  }

  /** The request's row, as its log has made it so far. */
  get record(): Readonly<RequestRecord> {
    return this.#record;
  }

  /** Its hops, in the order they started. */
  get attempts(): readonly Attempt[] {
    return this.#attempts;
  }

  /** Its log so far (see `LiveEvent`). */
  get events(): readonly LiveEvent[] {
    return this.#events;
  }

  get state(): LiveState {
    return this.#state;
  }

  /** When its last content frame went to the client; null before the first. */
  get lastContentAt(): number | null {
    return this.#lastContentAt;
  }

  /**
   * The route label of this request's metrics: set only once the model names a
   * configured route the key may use, so caller input never mints a series.
   */
  get metricsRoute(): string | null {
    return this.#metricsRoute;
  }

  /** Prices hops and meters the key; set once the request is admitted (docs/config.md). */
  get billing(): Billing | null {
    return this.#billing;
  }

  /**
   * The upstream the session was pinned to (its warm prompt cache) when its candidates were
   * first planned; null without a session or a pin, undefined until planned.
   */
  get warmUpstream(): string | null | undefined {
    return this.#warmUpstream;
  }

  /**
   * The request as the IR once its body is read: the turn a request abort fences against its
   * retry (gateway/live/fences.ts); null before.
   */
  get conversation(): IrRequest | null {
    return this.#conversation;
  }

  get clock(): Clock {
    return this.deps.clock;
  }

  /** Now, as an event's `at`: the clock's ms since the request started. */
  at(): number {
    return this.clock.now() - this.#record.startedAt;
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get finished(): boolean {
    return this.#finished;
  }

  /** How its hops are priced and its key metered, from its admission on. */
  billWith(billing: Billing): void {
    this.#billing = billing;
  }

  /** Its body was read: the turn it asks for, and its session when it named none. */
  parsed(ir: IrRequest, opts: { sessionId: string | null }): void {
    this.append({ type: "parsed", ir, sessionId: opts.sessionId });
  }

  /** Its model names `route`, a configured route the key may use. */
  routed(route: string): void {
    this.append({ type: "routed", route });
  }

  /**
   * Its candidates were planned; the first plan's warm upstream stands. Not an event: what the
   * planner remembers between a stream's passes, no part of the request's record.
   */
  planned(warm: string | null): void {
    if (this.#warmUpstream === undefined) this.#warmUpstream = warm;
  }

  /** A tool call's server and byte counts (docs/mcp.md "History and metrics"). */
  tool(fields: { server?: string; bytesIn?: number; bytesOut?: number }): void {
    this.append({ type: "tool", ...fields });
  }

  /** Waiting for an upstream's slot. */
  waitingForSlot(): void {
    this.append({ type: "slot_wait" });
  }

  /** Stops the request with `reason`; a second stop is ignored. */
  abort(reason: unknown): void {
    if (this.signal.aborted) return;
    this.append({ type: "abort", reason, at: this.at() });
    this.#controller.abort(reason);
  }

  /**
   * A hop to `upstream`. `movedFrom`: the session's warm upstream, when this hop goes elsewhere
   * (docs/observability.md "Cache-aware affinity"); the request's row keeps the first.
   * `resumeOffset`: where in the answer a resuming hop starts. `holdsUsage`: see `LiveEvent`.
   */
  startAttempt(
    upstream: string,
    model: string,
    opts: { movedFrom?: string; resumeOffset?: number; holdsUsage?: boolean } = {},
  ): Attempt {
    const hop = this.#attempts.length + 1;
    this.append({
      type: "hop",
      hop,
      upstream,
      model,
      movedFrom: opts.movedFrom ?? null,
      resumeOffset: opts.resumeOffset ?? null,
      holdsUsage: opts.holdsUsage ?? false,
      at: this.at(),
    });
    return this.#attempts[hop - 1]!;
  }

  /** A usage report merged by a resume over its hops (stream_pump.ts), already checked. */
  usage(usage: IrUsage): void {
    this.append({ type: "usage", usage });
  }

  /** The first content went to the client. */
  contentSent(): void {
    this.append({ type: "content", at: this.at() });
  }

  /**
   * A content frame went to the client. Not logged: a stream's frames are its bulk; it only
   * moves the idle clock of the live view (docs/design.md "The live record").
   */
  frame(): void {
    this.#lastContentAt = this.clock.now();
  }

  /** How the request ended for its client; the first settlement stands. */
  end(result: Settlement): void {
    if (this.#settled || this.#finished) return;
    this.append(
      result.error
        ? { type: "settled", status: result.status, error: result.error, at: this.at() }
        : { type: "settled", status: result.status, at: this.at() },
    );
  }

  /**
   * Writes the row and counts the request; the first call wins. `result` settles it first
   * (`end`); without any settlement it ended by its stop's reason, or by a fault of the gateway.
   */
  finish(result?: Settlement): void {
    if (this.#finished) return;
    if (result) this.end(result);
    if (!this.#settled) this.end(unsettled(this.signal));
    this.#write(this.#settled!);
  }

  /** Appends `e` to the log and folds it into the record. */
  append(e: LiveEvent): void {
    this.#apply(e);
    const last = this.#events.at(-1);
    // A hop's usage reports are cumulative: one run of them is kept as its last.
    if (e.type === "usage" && last?.type === "usage" && last.hop === e.hop) {
      this.#events[this.#events.length - 1] = e;
    } else this.#events.push(e);
  }

  /** The fold: one event's effect on the request's row, its hops' rows and its metrics. */
  #apply(e: LiveEvent): void {
    const r = this.#record;
    switch (e.type) {
      case "parsed":
        this.#conversation = e.ir;
        r.route = e.ir.model;
        r.stream = e.ir.stream;
        r.sessionId ??= e.sessionId;
        return;
      case "routed":
        this.#metricsRoute = e.route;
        return;
      case "slot_wait":
        this.#state = "waiting_for_slot";
        return;
      case "hop":
        return this.#hopStarted(e);
      case "headers":
        if (
          e.status < 300 && e.status >= 200 && r.stream && this.#state === "waiting_for_headers"
        ) {
          this.#state = "holding";
        }
        return this.#attempts[e.hop - 1]?.apply(e, this);
      case "claimed": {
        const a = this.#attempts[e.hop - 1]?.record;
        if (!a) return;
        this.#state = "streaming";
        r.upstream = a.upstream;
        r.upstreamModel = a.model;
        return;
      }
      case "content":
        return this.#contentSent(e.at);
      case "usage":
        if (e.hop === undefined) return this.takeUsage(e.usage);
        return this.#attempts[e.hop - 1]?.apply(e, this);
      case "tool":
        if (e.server !== undefined) r.toolServer = e.server;
        if (e.bytesIn !== undefined) r.bytesIn = e.bytesIn;
        if (e.bytesOut !== undefined) r.bytesOut = e.bytesOut;
        return;
      case "abort":
        return;
      case "settled":
        this.#settled = e;
        return;
      default:
        this.#attempts[e.hop - 1]?.apply(e, this);
    }
  }

  #hopStarted(e: Extract<LiveEvent, { type: "hop" }>): void {
    const attempt = new Attempt(
      {
        requestId: this.#record.id,
        hop: e.hop,
        upstream: e.upstream,
        model: e.model,
        outcome: null,
        status: null,
        errorCode: null,
        errorMessage: null,
        startedAt: this.#record.startedAt + e.at,
        headersMs: null,
        firstContentMs: null,
        durationMs: null,
        inputTokens: null,
        outputTokens: null,
        tokensEstimated: false,
        usageSource: null,
        droppedHeaders: null,
        costUsd: null,
        resumeOffset: e.resumeOffset,
        cachedTokens: null,
        cacheWriteTokens: null,
        cacheWrite1hTokens: null,
        cacheWriteUsd: null,
        movedFrom: e.movedFrom,
        trace: { spanId: newSpanId() },
      },
      this,
      e.holdsUsage,
    );
    this.#attempts.push(attempt);
    const r = this.#record;
    r.movedFrom ??= e.movedFrom;
    r.upstream = e.upstream;
    r.upstreamModel = e.model;
    this.#state = "waiting_for_headers";
    if (this.#row !== "real") this.#reachedUpstream();
    this.flushAttempt(attempt);
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
    if (this.#row === "unwritten") this.deps.sink.writeRequest(this.#record);
    this.#row = "real";
    this.deps.refusal?.release();
  }

  /** Hands a hop's row to the sink (it keeps the row: see `HistorySink`). */
  flushAttempt(attempt: Attempt): void {
    this.deps.sink.writeAttempt(attempt.record);
  }

  /** A hop ended (its row says how): it is priced, billed and counted. */
  attemptEnded(attempt: Attempt, r: AttemptRecord): void {
    this.deps.metrics.attempts.inc({ upstream: r.upstream, outcome: r.outcome ?? "error" });
    const priced = this.#billing?.bill(r);
    if (priced) {
      r.costUsd = priced.costUsd;
      r.cacheWriteUsd = priced.cacheWriteUsd;
    }
    if (r.costUsd) {
      const route = this.#metricsRoute ?? UNKNOWN_ROUTE;
      this.deps.metrics.cost.inc({ route, upstream: r.upstream }, r.costUsd);
    }
    this.flushAttempt(attempt);
  }

  /** Usage for the request's row, already checked: from its answering hop, or merged by a resume. */
  takeUsage(usage: IrUsage): void {
    takeUsage(this.#record, usage);
    this.#record.reasoningTokens = usage.reasoningTokens ?? this.#record.reasoningTokens;
  }

  /** The answering hop's tokens were estimated: the request's row says so, with at least as many. */
  estimated(a: Readonly<AttemptRecord>): void {
    const r = this.#record;
    r.inputTokens ??= a.inputTokens;
    r.outputTokens = Math.max(r.outputTokens ?? 0, a.outputTokens ?? 0);
    markEstimated(r);
  }

  #contentSent(at: number): void {
    this.#lastContentAt = this.#record.startedAt + at;
    this.#state = "streaming";
    const r = this.#record;
    if (r.firstContentMs !== null) return;
    r.firstContentMs = at;
    this.deps.metrics.firstContent.observe(
      { route: this.#metricsRoute ?? UNKNOWN_ROUTE },
      this.clock.elapsed(r.startedAt, r.startedAt + at) / 1000,
    );
  }

  /** The row closed as its settlement says, counted, and handed to the sink: once. */
  #write(result: Extract<LiveEvent, { type: "settled" }>): void {
    this.#finished = true;
    const r = this.#record;
    const err = result.error;
    r.state = "closed";
    r.endedAt = r.startedAt + result.at;
    r.durationMs = result.at;
    r.status = result.status;
    r.outcome = err ? "error" : "success";
    r.failureSource = err?.source ?? null;
    r.errorCode = err?.code ?? null;
    r.errorMessage = err ? err.recordedMessage : null;
    const hops = this.#attempts.map((a) => a.record);
    if (this.#attempts.some((a) => a.usageRejected)) r.usageSource = "rejected";
    r.costUsd = requestCost(hops);
    r.cacheWriteUsd = sumPriced(hops.map((a) => a.cacheWriteUsd));
    const { metrics } = this.deps;
    const route = this.#metricsRoute ?? UNKNOWN_ROUTE;
    metrics.requests.inc({ route, outcome: r.outcome });
    metrics.duration.observe({ route }, this.clock.elapsed(r.startedAt, r.endedAt) / 1000);
    if (r.errorCode === "gw.client.disconnected") metrics.disconnects.inc();
    if (r.errorCode === "gw.request.aborted") metrics.aborts.inc();
    for (const a of hops) {
      const upstream = a.upstream;
      if (a.inputTokens) metrics.tokens.inc({ upstream, direction: "input" }, a.inputTokens);
      if (a.outputTokens) metrics.tokens.inc({ upstream, direction: "output" }, a.outputTokens);
      countCacheTokens(metrics, a);
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
 * A request that ended with no settlement (a fault skipped it): its stop's reason when it was
 * stopped, else the gateway's own fault.
 */
function unsettled(signal: AbortSignal): Settlement {
  const reason = signal.aborted ? signal.reason : undefined;
  const error = reason instanceof GatewayError
    ? reason
    : new GatewayError("the request ended without an answer", { code: "gw.gateway.internal" });
  return { status: error.status, error };
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
