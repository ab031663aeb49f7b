import {
  type ClientHeaders,
  clientHeadersFor,
  type UpstreamPost,
} from "../formats/client_headers.ts";
import type { Upstream } from "../config/schema.ts";
import type { Clock } from "../runtime/clock.ts";
import type { ClientRequestContext, UpstreamAdapter } from "../formats/format.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { type IdleOwner, IdleTimer } from "./idle_timer.ts";
import { BodyReader } from "./body_reader.ts";
import { firstContentSecs, firstContentTimeout } from "./first_content_timer.ts";
import type { Attempt, LiveRequest } from "../live/live_request.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { idleTimeout } from "./stop_reasons.ts";
import { retryAfterSecs } from "../formats/upstream_error.ts";
import type { Candidate, RouteDeps, RoutedRequest } from "../route/route_request.ts";
import { type FirstContentGate, OPEN_GATE } from "./first_content_gate.ts";
import { type HopEnding, statusEnding, thrownEnding } from "./hop_ending.ts";
import { readCapped, UPSTREAM_CAPS } from "../formats/upstream_caps.ts";
import { UsageLedger } from "./usage_ledger.ts";
import { passesBodyThrough } from "../route/passthrough.ts";
import { CancelTimer } from "./cancel_timer.ts";
import { traceUpstream } from "./upstream_trace.ts";
import type { ProbeHold } from "./probe_hold.ts";

/**
 * The reason a finished hop's connection is dropped. Shared and plain: the
 * default DOMException would build a stack trace on every request.
 */
const HOP_DONE = Object.freeze({ reason: "hop finished" });

/** Everything the request path shares across requests. */
export interface ForwardDeps extends RouteDeps {
  clock: Clock;
  metrics: Metrics;
  log: Logger;
  env: (name: string) => string | undefined;
  fetch: typeof fetch;
}

/** One request on its way through the candidates. */
export interface ForwardRequest extends RoutedRequest {
  live: LiveRequest;
  /** The client's parsed body, sent on unchanged (but for the model) to a same-format upstream. */
  body: Record<string, unknown>;
  ctx: ClientRequestContext;
  /** The client's provider headers and query flags, for a same-format upstream. */
  clientHeaders?: ClientHeaders;
}

export type { Candidate } from "../route/route_request.ts";

/** An upstream body read through a hop (see `Hop.reader`, body_reader.ts). */
export interface HopReader<T> {
  next(): Promise<T | undefined>;
  /** `next` in two halves, for a loop that awaits the body's read itself (body_reader.ts). */
  read(): Promise<ReadableStreamReadResult<T>>;
  took(result: ReadableStreamReadResult<T>): T | undefined;
  close(): void;
}

/**
 * One call to one upstream: its abort switch (linked to the request's), its
 * idle timer and its attempt row. `close()` runs on every exit path.
 *
 * The hop is itself the listener of what stops it (`handleEvent`) and the owner its idle timer
 * tells (`idled`, `noFirstContent`): a held stream keeps it for as long as it is quiet, and a
 * closure for each of those was heap per held stream (docs/performance_log.md "One object per
 * held stream").
 */
export class Hop implements IdleOwner {
  readonly controller = new AbortController();
  readonly attempt: Attempt;
  readonly idle: IdleTimer;
  readonly idleSecs: number;
  /** What this hop received, for the tokens its upstream did not report (usage_ledger.ts). */
  readonly ledger = new UsageLedger();
  readonly gate: FirstContentGate;
  /** The id the upstream gave its answer, where it names one (an Interactions interaction id). */
  answerId?: string;
  /**
   * The continuation handles this hop bound to the request's key (bind_continuations.ts); made
   * at the first, as most answers name none (a held stream's heap).
   */
  continuations: { bound: Set<string>; capped: boolean } | null = null;
  #cancel: CancelTimer;
  /** What stops it besides its own switch (see `opts.signal`). */
  readonly #stops: AbortSignal;
  /** Answers received whose bodies were not read to their end: a finished hop aborts for them. */
  #unread = 0;

  constructor(
    readonly req: ForwardRequest,
    readonly opts: {
      target: Candidate;
      deps: ForwardDeps;
      release: () => void;
      /** What stops it besides its own switch: the request's signal, or its lane's in a hedge race. */
      signal?: AbortSignal;
      /** Whether it may answer (see first_content_gate.ts); open unless hedged. */
      gate?: FirstContentGate;
      /**
       * It is the one probe of its half-open member, upstream or both (docs/design.md
       * "Cooldown"): the tickets it holds, never empty, given back when it settles.
       */
      probe?: ProbeHold;
    },
  ) {
    const { live } = req;
    const { upstream, candidate } = opts.target;
    const { clock, metrics } = opts.deps;
    this.#cancel = new CancelTimer(this.controller.signal, {
      clock,
      metrics,
      upstream: upstream.id,
    });
    this.gate = opts.gate ?? OPEN_GATE;
    const warm = live.warmUpstream;
    this.attempt = live.startAttempt(upstream.id, candidate.model, {
      movedFrom: warm && warm !== upstream.id ? warm : undefined,
      resumeOffset: req.resumeAt,
      // A replay's usage stays on its row until it has matched what the client has (docs/liveness.md).
      holdsUsage: this.gate.holdsUsage || req.replay === true,
    });
    const stops = opts.signal ?? live.signal;
    this.#stops = stops;
    if (stops.aborted) this.handleEvent();
    stops.addEventListener("abort", this, { once: true });
    this.idleSecs = opts.deps.config.failover.idle_timeout_secs;
    const firstSecs = firstContentSecs(this);
    this.idle = new IdleTimer(opts.deps.clock, {
      ms: this.idleSecs * 1000,
      owner: this,
      firstContentMs: firstSecs === undefined ? undefined : firstSecs * 1000,
    });
  }

  /** What stops it stopped: its own switch follows. */
  handleEvent(): void {
    this.controller.abort(this.#stops.reason);
  }

  /** Silence for its idle timeout (idle_timer.ts). */
  idled(): void {
    this.controller.abort(idleTimeout(this.upstream.id, {
      secs: this.idleSecs,
      midStream: this.attempt.contentSeen,
      timeoutStatus: this.opts.deps.config.failover.timeout_status,
    }));
  }

  /** No content within its first-content timeout (idle_timer.ts). */
  noFirstContent(): void {
    this.controller.abort(firstContentTimeout(this, firstContentSecs(this)!));
  }

  get upstream(): Upstream {
    return this.opts.target.upstream;
  }

  get adapter(): UpstreamAdapter {
    return this.opts.deps.adapters[this.upstream.kind];
  }

  /** Sends the request; answers the response or throws the reason it failed. */
  async send(): Promise<Response> {
    const { deps } = this.opts;
    const passthrough = passesBodyThrough(this.req, this.upstream.kind);
    const { forwarded, dropped } = clientHeadersFor(this.req.clientHeaders, passthrough);
    const call = {
      ir: this.req.ir,
      passthrough: passthrough ? this.req.body : undefined,
      forwarded,
      upstream: this.upstream,
      model: this.opts.target.candidate.model,
      env: deps.env,
      config: deps.config,
      signal: this.controller.signal,
      fetch: deps.fetch,
    };
    let built: UpstreamPost | Request;
    try {
      // A url and init where the adapter has them: fetch would copy a Request once more.
      built = await this.adapter.buildPost?.(call) ?? await this.adapter.buildRequest(call);
    } catch (err) {
      throw this.#buildFault(err);
    }
    return await this.sendBuilt(built, { droppedHeaders: dropped });
  }

  /** Builds one call of this hop (an embeddings hop makes several), as `send` builds its one. */
  async build<T>(make: () => Promise<T>): Promise<T> {
    try {
      return await make();
    } catch (err) {
      throw this.#buildFault(err);
    }
  }

  /**
   * What the gateway's own code threw while building a call (not one of its errors: a bug, a
   * limit of the runtime) is the gateway's fault, never the upstream's, which was not called:
   * it ends the hop `gateway_fault`, uncharged (verdict.ts).
   */
  #buildFault(err: unknown): unknown {
    if (err instanceof GatewayError || this.controller.signal.aborted) return err;
    const detail = err instanceof Error ? err.message : String(err);
    return new GatewayError(
      `the gateway could not build its call to upstream ${this.upstream.id}: ${detail}`,
      { code: "gw.gateway.internal", cause: err },
    );
  }

  /**
   * Sends one call built for this hop: the generation's one, or each call of an embeddings
   * hop that needs several (gateway/forward/embed_forward.ts). The attempt's headers time is
   * its first answer's; its status the last one's.
   */
  async sendBuilt(
    built: UpstreamPost | Request,
    opts: { droppedHeaders?: string | null } = {},
  ): Promise<Response> {
    const { signal } = this.controller;
    const fetch = this.opts.deps.fetch;
    const request = built instanceof Request;
    const trace = traceUpstream(
      request ? built : { url: built.url, headers: built.init.headers },
      this,
    );
    this.attempt.sent({ droppedHeaders: opts.droppedHeaders, trace });
    let res: Response;
    try {
      res = request
        ? await fetch(built, { signal })
        : await fetch(built.url, { ...built.init, signal });
    } catch (err) {
      this.#cancel.closed();
      throw err;
    }
    this.attempt.headers(res.status);
    if (res.body) this.#unread++;
    return res;
  }

  /**
   * This hop's first content: true when it may answer (its gate lets it: first_content_gate.ts),
   * and the request's upstream is then this hop's; false when another hop claimed first.
   */
  claim(): boolean {
    if (!this.gate.claim()) return false;
    this.attempt.claimed();
    return true;
  }

  /**
   * Reads an upstream body until it ends or the hop is stopped (body_reader.ts). The stop
   * cancels the read itself, not only the fetch: under load the runtime was seen to keep an
   * aborted fetch's body open, and the request then waited on it for ever. A stopped read
   * throws the stop's reason. `next` answers undefined at the end; `close` (always, in a
   * `finally`) lets the body go. A plain loop, not an async generator: a generator costs
   * promises per chunk on the hottest path there is (docs/benchmarks.md).
   */
  reader<T>(
    body: ReadableStream<T>,
    opts: { reuse?: boolean; firstBytes?: number } = {},
  ): HopReader<T> {
    return new BodyReader(body, {
      ...opts,
      signal: this.controller.signal,
      owner: this,
    });
  }

  /** A body of this hop's is let go (body_reader.ts): the cancel timer's end (cancel_timer.ts). */
  bodyClosed(): void {
    this.#cancel.closed();
  }

  /** A body of this hop's was read to its end (body_reader.ts). */
  bodyEnded(): void {
    this.#unread--;
  }

  /** `reader` as an async iterable, where a chunk's cost does not matter (an error body). */
  async *read<T>(body: ReadableStream<T>): AsyncGenerator<T> {
    const reader = this.reader(body);
    try {
      for (let chunk = await reader.next(); chunk !== undefined; chunk = await reader.next()) {
        yield chunk;
      }
    } finally {
      reader.close();
    }
  }

  /** How a non-2xx answer ended the hop (hop_ending.ts), once its body is read. */
  async failedStatus(res: Response): Promise<HopEnding> {
    // Read through the hop, so a stop while a slow error body trickles in closes it at once too.
    const read = res.body ? new Response(ReadableStream.from(this.read(res.body))) : res;
    const body = await readCapped(read, UPSTREAM_CAPS.errorBodyBytes);
    const retryAfter = retryAfterSecs(res.headers.get("retry-after"), this.opts.deps.clock.now());
    const decoded = this.adapter.decodeError(res.status, body, { headers: res.headers });
    const error = retryAfter === undefined ? decoded : decoded.with({ retryAfterSecs: retryAfter });
    return statusEnding(error, { model: this.opts.target.candidate.model });
  }

  /** How a thrown error ended the hop: our stop reason, or what went wrong upstream. */
  endingOf(err: unknown): HopEnding {
    return thrownEnding(err, {
      signal: this.controller.signal,
      upstream: this.upstream.id,
      content: this.attempt.contentSeen,
    });
  }

  /** Records the attempt's end, with the tokens it billed (usage_ledger.ts); once. */
  end(outcome: Parameters<Attempt["end"]>[0], error?: GatewayError): void {
    if (this.attempt.ended) return;
    this.ledger.settle(this.attempt, { ir: this.req.ir, outcome });
    this.attempt.end(outcome, error);
  }

  close(): void {
    this.idle.close();
    this.#stops.removeEventListener("abort", this);
    this.opts.release();
    // A hop whose every answer was read to its end holds no connection: an abort would only
    // cost its event (docs/performance_log.md "Held stream and per-read objects").
    if (!this.controller.signal.aborted && this.#unread > 0) this.controller.abort(HOP_DONE);
  }
}
