import { type ClientHeaders, clientHeadersFor } from "../accept/client_headers.ts";
import type { Config, Route, RouteCandidate, Upstream } from "../config/schema.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Cooldowns } from "../route/cooldown.ts";
import type {
  ClientCodec,
  ClientRequestContext,
  UpstreamAdapter,
  UpstreamKind,
} from "../formats/format.ts";
import { type GatewayCode, GatewayError } from "../runtime/gateway_error.ts";
import { IdleTimer } from "./idle_timer.ts";
import { type ChunkReader, reusingReader } from "./body_reader.ts";
import { firstContentSecs, startFirstContentTimer } from "./first_content_timer.ts";
import type { IrRequest, IrUsage } from "../formats/ir.ts";
import type { Attempt, LiveRequest } from "../live/live_request.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Metrics } from "../runtime/metrics.ts";
import type { Slots } from "../route/slots.ts";
import { idleTimeout, stopReason } from "./stop_reasons.ts";
import { isRetryableStatus, retryAfterSecs } from "./upstream_error.ts";
import { type Affinity, affinitySession } from "../route/affinity.ts";
import type { Lane } from "./hedge_lane.ts";
import { readCapped, UPSTREAM_CAPS } from "../formats/upstream_caps.ts";
import { UsageLedger } from "./usage_ledger.ts";
import { CancelTimer } from "./cancel_timer.ts";
import { traceUpstream } from "../observability/upstream_trace.ts";

/**
 * The reason a finished hop's connection is dropped. Shared and plain: the
 * default DOMException would build a stack trace on every request.
 */
const HOP_DONE = Object.freeze({ reason: "hop finished" });

/** Stops of the whole request (not the upstream's doing) and the outcome a hop gets for each. */
const REQUEST_STOPS: Partial<Record<GatewayCode, "aborted" | "client_disconnected">> = {
  "gw.request.aborted": "aborted",
  "gw.client.disconnected": "client_disconnected",
  "gw.gateway.shutting_down": "aborted",
};

/** Everything the request path shares across requests. */
export interface ForwardDeps {
  clock: Clock;
  config: Config;
  adapters: Record<UpstreamKind, UpstreamAdapter>;
  cooldowns: Cooldowns;
  slots: Slots;
  affinity: Affinity;
  metrics: Metrics;
  log: Logger;
  env: (name: string) => string | undefined;
  fetch: typeof fetch;
}

/** One request on its way through the candidates. */
export interface ForwardRequest {
  live: LiveRequest;
  ir: IrRequest;
  /** The client's parsed body, sent on unchanged (but for the model) to a same-format upstream. */
  body: Record<string, unknown>;
  codec: ClientCodec;
  ctx: ClientRequestContext;
  route: Route;
  /** The client's provider headers and query flags, for a same-format upstream. */
  clientHeaders?: ClientHeaders;
  /** A mid-stream resume's request (docs/liveness.md): the prefill is in the IR, so it is always translated. */
  prefilled?: boolean;
}

export interface Candidate {
  upstream: Upstream;
  candidate: RouteCandidate;
}

/**
 * docs/design.md "Client API": an upstream of the client's own format is sent the client's body,
 * unchanged but for the model; any other gets a translation of the IR. This
 * is about the request only: whether the answer's bytes can pass through too
 * is the client's stream shape's business (Gemini's JSON array cannot).
 */
export function passesBodyThrough(
  req: Pick<ForwardRequest, "codec" | "prefilled">,
  kind: UpstreamKind,
): boolean {
  return !req.prefilled && req.codec.format === kind;
}

/**
 * What one hop came to. `retry` and `next` are failures before content;
 * `stop` ends the request with an error the caller must see as is.
 */
export type HopResult =
  | { kind: "done" }
  | { kind: "retry"; error: GatewayError; delaySecs?: number }
  | { kind: "next"; error: GatewayError }
  | { kind: "stop"; error: GatewayError };

/** An upstream body read through a hop (see `Hop.reader`). */
export interface HopReader<T> {
  next(): Promise<T | undefined>;
  close(): void;
}

/**
 * One call to one upstream: its abort switch (linked to the request's), its
 * idle timer and its attempt row. `close()` runs on every exit path.
 */
export class Hop {
  readonly controller = new AbortController();
  readonly attempt: Attempt;
  readonly idle: IdleTimer;
  readonly idleSecs: number;
  /** What this hop received, for the tokens its upstream did not report (usage_ledger.ts). */
  readonly ledger = new UsageLedger();
  #cancel: CancelTimer;
  #unlink: () => void;
  #stopFirstContent: () => void;

  constructor(
    readonly req: ForwardRequest,
    readonly opts: {
      target: Candidate;
      deps: ForwardDeps;
      release: () => void;
      /** Its lane when the candidate is hedged (see hedge_race.ts). */
      lane?: Lane | null;
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
    opts.lane?.join(this);
    this.attempt = live.startAttempt(upstream.id, candidate.model);
    const forward = () => this.controller.abort(live.signal.reason);
    if (live.signal.aborted) forward();
    live.signal.addEventListener("abort", forward, { once: true });
    this.#unlink = () => live.signal.removeEventListener("abort", forward);
    const failover = opts.deps.config.failover;
    this.idleSecs = failover.idle_timeout_secs;
    this.idle = new IdleTimer(opts.deps.clock, {
      ms: this.idleSecs * 1000,
      onIdle: () =>
        this.controller.abort(idleTimeout(upstream.id, {
          secs: this.idleSecs,
          midStream: this.attempt.contentSeen,
          timeoutStatus: failover.timeout_status,
        })),
    });
    this.#stopFirstContent = startFirstContentTimer(this);
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
    this.attempt.record.droppedHeaders = dropped;
    const call = {
      ir: this.req.ir,
      passthrough: passthrough ? this.req.body : undefined,
      forwarded,
      upstream: this.upstream,
      model: this.opts.target.candidate.model,
      env: deps.env,
      config: deps.config,
    };
    const { signal } = this.controller;
    // A url and init where the adapter has them: fetch would copy a Request once more.
    const post = await this.adapter.buildPost?.(call);
    const request = post ? null : await this.adapter.buildRequest(call);
    traceUpstream(post ? { url: post.url, headers: post.init.headers } : request!, this);
    let res: Response;
    try {
      res = post
        ? await deps.fetch(post.url, { ...post.init, signal })
        : await deps.fetch(request!, { signal });
    } catch (err) {
      this.#cancel.closed();
      throw err;
    }
    this.attempt.headers(res.status);
    return res;
  }

  /**
   * Reads an upstream body until it ends or the hop is stopped. The stop
   * cancels the read itself, not only the fetch: under load the runtime was
   * seen to keep an aborted fetch's body open, and the request then waited on
   * it for ever. A stopped read throws the stop's reason. `next` answers
   * undefined at the end; `close` (always, in a `finally`) lets the body go.
   * A plain loop, not an async generator: a generator costs promises per
   * chunk on the hottest path there is (docs/benchmarks.md).
   */
  reader<T>(
    body: ReadableStream<T>,
    opts: { reuse?: boolean; firstBytes?: number } = {},
  ): HopReader<T> {
    const { signal } = this.controller;
    // `reuse`: each chunk is valid only until the next is asked for (see reusingReader).
    const reader: ChunkReader<T> = opts.reuse ? reusingReader(body, opts) : body.getReader();
    let closed = false;
    const cancel = () => {
      if (closed) return;
      closed = true;
      void reader.cancel(signal.reason).catch(() => {}).finally(() => this.#cancel.closed());
    };
    signal.addEventListener("abort", cancel, { once: true });
    return {
      async next() {
        if (signal.aborted) throw signal.reason;
        const { done, value } = await reader.read();
        if (signal.aborted) throw signal.reason;
        return done ? undefined : value;
      },
      close() {
        signal.removeEventListener("abort", cancel);
        cancel();
        reader.release?.();
      },
    };
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

  /** Classifies a non-2xx answer (docs/design.md "Failover before content" taxonomy) after reading its body. */
  async failedStatus(res: Response): Promise<HopResult> {
    // Read through the hop, so a stop while a slow error body trickles in closes it at once too.
    const read = res.body ? new Response(ReadableStream.from(this.read(res.body))) : res;
    const body = await readCapped(read, UPSTREAM_CAPS.errorBodyBytes);
    const { clock, cooldowns } = this.opts.deps;
    const retryAfter = retryAfterSecs(res.headers.get("retry-after"), clock.now());
    const decoded = this.adapter.decodeError(res.status, body, { headers: res.headers });
    const error = retryAfter === undefined ? decoded : decoded.with({ retryAfterSecs: retryAfter });
    if (error.source === "client") {
      this.end("error", error);
      return { kind: "stop", error };
    }
    this.fail(error);
    if (res.status === 429 && retryAfter !== undefined) {
      cooldowns.pauseFor(this.upstream.id, retryAfter);
    }
    if (isRetryableStatus(res.status)) return { kind: "retry", error, delaySecs: retryAfter };
    return { kind: "next", error };
  }

  /** Classifies a thrown error: our own stop reasons, or a broken connection. */
  thrown(err: unknown): HopResult {
    const reason = stopReason(this.controller.signal);
    const stopped = reason && REQUEST_STOPS[reason.code];
    if (reason && stopped) {
      this.end(stopped, reason);
      return { kind: "stop", error: reason };
    }
    if (reason?.code === "gw.upstream.hedge_lost") {
      this.opts.lane?.lost(this, reason);
      return { kind: "stop", error: reason };
    }
    if (
      reason?.code === "gw.upstream.idle_timeout" ||
      reason?.code === "gw.upstream.first_content_timeout"
    ) {
      this.reportIdle("before_content", reason.code);
      this.fail(reason, "idle_timeout");
      this.opts.deps.affinity.drop(this.req.route.model, {
        sessionId: affinitySession(this.req.live.record),
        upstream: this.upstream.id,
      });
      return { kind: "next", error: reason };
    }
    if (reason?.code === "gw.upstream.deadline") {
      this.fail(reason);
      return { kind: "next", error: reason };
    }
    if (err instanceof GatewayError && err.source === "client") {
      // Input the translation finds malformed (tool arguments that are not an object): the
      // caller's to fix, not a health fault. What a kind cannot express never gets this far:
      // runCandidates skips such candidates (see inexpressible).
      this.end("error", err);
      return { kind: "stop", error: err };
    }
    if (err instanceof GatewayError) {
      this.fail(err);
      return { kind: "next", error: err };
    }
    const error = new GatewayError(
      `could not reach upstream ${this.upstream.id}: ${err instanceof Error ? err.message : err}`,
      { code: "gw.upstream.unreachable", cause: err },
    );
    this.fail(error);
    return { kind: "retry", error };
  }

  /** Counts and logs an idle timeout (`gw.upstream.idle_timeout {upstream, secs}`). */
  reportIdle(
    phase: "before_content" | "mid_stream",
    code: GatewayCode = "gw.upstream.idle_timeout",
  ): void {
    const { metrics, log } = this.opts.deps;
    const first = code === "gw.upstream.first_content_timeout";
    const secs = first ? firstContentSecs(this) : this.idleSecs;
    metrics.idleTimeouts.inc({ upstream: this.upstream.id, phase });
    log.event(code, { upstream: this.upstream.id, secs });
  }

  /** A failure before content: charged to the upstream once, here. */
  fail(error: GatewayError, outcome: "error" | "idle_timeout" = "error"): void {
    if (this.attempt.ended) return;
    this.end(outcome, error);
    this.opts.deps.cooldowns.failure(this.upstream.id, error.code);
  }

  end(outcome: Parameters<Attempt["end"]>[0], error?: GatewayError): void {
    if (this.attempt.ended) return;
    this.ledger.settle(this.attempt, { ir: this.req.ir, outcome });
    this.attempt.end(outcome, error);
  }

  /**
   * The first content: whether this hop may answer. Always true unless it is
   * hedged and another hop got there first (then this one is being stopped).
   */
  claim(): boolean {
    return this.opts.lane?.claim(this) ?? true;
  }

  /** Whether another hedged hop could still win, so nothing of this one may reach the client. */
  get contested(): boolean {
    return this.opts.lane?.contested() ?? false;
  }

  /** Usage the upstream reported; a hedged hop's reaches the request's row only if it wins. */
  usage(usage: IrUsage): void {
    if (this.opts.lane) this.opts.lane.usage(this, usage);
    else this.attempt.usage(usage);
  }

  /** Content arrived: the upstream is healthy and the conversation stays with it. */
  succeeded(): void {
    this.opts.deps.cooldowns.success(this.upstream.id);
    this.opts.deps.affinity.set(this.req.route.model, {
      sessionId: affinitySession(this.req.live.record),
      upstream: this.upstream.id,
    });
  }

  close(): void {
    this.opts.lane?.leave(this);
    this.idle.stop();
    this.#stopFirstContent();
    this.#unlink();
    this.opts.release();
    if (!this.controller.signal.aborted) this.controller.abort(HOP_DONE);
  }
}
