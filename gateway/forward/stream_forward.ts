import { type ChannelOwner, StreamChannel } from "./client_channel.ts";
import type { ClientStreamEncoder, ClientStreamShape } from "../formats/format.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { runCandidates, type RunHop } from "./failover.ts";
import { ResumePass } from "./resume_pass.ts";
import { StreamResume } from "./stream_resume.ts";
import type { ForwardDeps, ForwardRequest, Hop } from "./hop.ts";
import type { HopEnding } from "./hop_ending.ts";
import { clientDisconnected } from "./stop_reasons.ts";
import { type PumpOpts, StreamPump } from "./stream_pump.ts";

/** docs/design.md "Failover before content": how long a streamed answer may be held before headers go out. */
export const OPENING_HOLD_MS = 15_000;
export const KEEP_ALIVE_MS = 15_000;

/**
 * Serves a streamed answer. Resolves with the response as soon as its
 * headers are decided; the stream itself runs on, and `done` settles when
 * the request has ended and is settled.
 */
export function forwardStream(
  req: ForwardRequest,
  deps: ForwardDeps,
): { response: Promise<Response>; done: Promise<void> } {
  const run = new StreamRun(req, deps);
  return { response: run.channel.response, done: run.done };
}

/**
 * One streamed answer's state: the object its client channel tells of a cancel
 * (`clientGone`), holding what each hop's pump is given. One object with methods rather
 * than a scope of closures: a held stream keeps it for as long as it is quiet
 * (docs/performance_log.md "One object per held stream").
 */
class StreamRun implements ChannelOwner {
  readonly channel: StreamChannel;
  readonly done: Promise<void>;
  readonly #shape: ClientStreamShape;
  readonly #encoder: ClientStreamEncoder;
  readonly #resume: StreamResume;
  #cancelHold: (() => void) | null = null;

  constructor(readonly req: ForwardRequest, readonly deps: ForwardDeps) {
    const { live, codec, ctx } = req;
    const shape = this.#shape = codec.streamShape(ctx);
    this.#encoder = codec.streamEncoder({
      ...ctx,
      id: live.record.id,
      model: req.ir.model,
      now: deps.clock.now,
    });
    this.channel = new StreamChannel({
      codec,
      shape,
      encoder: this.#encoder,
      requestId: live.record.id,
      clock: deps.clock,
      keepAliveMs: KEEP_ALIVE_MS,
      owner: this,
    });
    // Gemini JSON arrays are never answered early: the array can't carry a comment.
    if (shape.keepAlive !== null || ctx.sse === true) {
      this.#cancelHold = deps.clock.after(OPENING_HOLD_MS, () => this.#holdOver());
    }
    this.#resume = StreamResume.for(req, { client: codec.format });
    this.done = this.#run();
  }

  /** The client cancelled its stream. */
  clientGone(): void {
    this.req.live.abort(clientDisconnected());
  }

  /** The opening hold is over with no content yet: headers go out, and keep-alives. */
  #holdOver(): void {
    this.#cancelHold = null;
    const { channel } = this;
    if (channel.headersSent) return;
    channel.sendHeaders();
    channel.startKeepAlives();
  }

  readonly #runHop: RunHop = (hop, opts) =>
    streamHop(hop, {
      ...opts,
      shape: this.#shape,
      channel: this.channel,
      encoder: this.#encoder,
      resume: this.#resume,
    });

  /**
   * The candidate loop, then the stream's end. Its end is a reaction on the loop's promise, not
   * an async frame awaiting it, which a held stream would keep suspended for its whole life.
   */
  #run(): Promise<void> {
    const { req, deps, channel } = this;
    const runHop = this.#runHop;
    // Only a route that resumes watches its hops: the others hold nothing for it.
    const pass = this.#resume.enabled
      ? new ResumePass(req, { deps, resume: this.#resume, channel })
      : null;
    let loop: Promise<GatewayError | null>;
    try {
      loop = runCandidates(req, { deps, runHop, onSettled: pass?.watch });
    } catch (err) {
      loop = Promise.reject(err);
    }
    if (pass) loop = loop.then((error) => pass.after(error, runHop));
    return loop.then((error) => this.#end(error), (err) => this.#crashed(err));
  }

  /** A bug must still end the client's stream and the row, never an unhandled rejection. */
  #crashed(err: unknown): Promise<void> {
    this.deps.log.event("gateway.internal_error", { error: String(err) });
    return this.#end(GatewayError.from(err));
  }

  async #end(error: GatewayError | null): Promise<void> {
    this.#cancelHold?.();
    this.#cancelHold = null;
    if (error) await this.channel.fail(error);
    // Settled here; the request handler's `finally` writes the row (accept/proxy.ts).
    this.req.live.end({ status: error?.status ?? 200, error: error ?? undefined });
  }
}

/**
 * One hop of a streamed answer: its status, or its stream through a pump (stream_pump.ts). The
 * pump settles this hop's one promise itself: neither an async frame nor a promise adopting the
 * pump's stays for the stream's whole life (docs/performance_log.md "One object per held
 * stream").
 */
function streamHop(hop: Hop, opts: PumpOpts): Promise<HopEnding> {
  return new Promise<HopEnding>((resolve, reject) => {
    hop.send().then((res) => {
      try {
        if (!res.ok || !res.body) return resolve(hop.failedStatus(res));
        new StreamPump(hop, opts).run(res.body, { resolve, reject });
      } catch (err) {
        reject(err);
      }
    }, reject);
  });
}
