import type { GatewayError } from "../runtime/gateway_error.ts";
import type { AttemptRecord } from "../../db/records.ts";
import type { StreamChannel } from "./client_channel.ts";
import { type OnSettled, runCandidates, type RunHop } from "./failover.ts";
import type { ForwardDeps, ForwardRequest } from "./hop.ts";
import { type StreamResume, withPrefill } from "./stream_resume.ts";
import { stopReason } from "./stop_reasons.ts";
import { routeMembers } from "../config/route_entries.ts";
import type { RouteCandidate } from "../config/schema.ts";

/**
 * Mid-stream resume (docs/liveness.md). Watches a stream's settled hops to
 * learn which upstreams were tried and whether the last one broke after its
 * content went out; `after` then hands such a break to the route's
 * prefill-capable candidates, one pass of the candidate loop per break. Everything else about
 * the loop is unchanged: a started answer still goes to no other candidate
 * except as the continuation of exactly what the client has.
 */
export class ResumePass {
  #tried = new Set<string>();
  #broken = false;
  /** The broken hop's row: its tokens, estimated where its usage never came, count in the answer's. */
  #brokenRow: AttemptRecord | null = null;

  constructor(
    readonly req: ForwardRequest,
    readonly opts: { deps: ForwardDeps; resume: StreamResume; channel: StreamChannel },
  ) {}

  /** Whether the route resumes at all: with it off, the stream path runs as it always did. */
  get enabled(): boolean {
    return this.opts.resume.enabled;
  }

  /**
   * Every settled hop, of the first pass and of each resume: noted, otherwise
   * untouched. A break the verdict table calls resumable, with the request
   * itself still going, is one to mend.
   */
  readonly watch: OnSettled = (hop, settled) => {
    this.#tried.add(hop.upstream.id);
    this.#broken = settled.step === "stop" && settled.resumable &&
      !stopReason(this.req.live.signal);
    if (this.#broken) this.#brokenRow = hop.attempt.record;
  };

  /**
   * After the candidate loop: a stream broken after content is resumed while a
   * capable candidate is left. Answers the error the client's stream ends
   * with, or null when a continuation finished the answer. A resume that never
   * got going ends with the break it tried to mend, never its own failure (a
   * refused prefill is not what went wrong).
   */
  async after(failure: GatewayError | null, runHop: RunHop): Promise<GatewayError | null> {
    const { req } = this;
    const { deps, resume, channel } = this.opts;
    while (failure && this.#broken) {
      this.#broken = false;
      // The route stays as it is (its pools keep their picks); only these are planned.
      const only = (c: RouteCandidate) => c.accepts_prefill && !this.#tried.has(c.upstream);
      if (!routeMembers(req.route).some(only)) return failure;
      const point = resume.begin(this.#brokenRow);
      if (!point) return failure;
      deps.log.event("gw.stream.resume", { offset: point.offset, after: failure.code });
      channel.startKeepAlives();
      const resumed = await runCandidates({
        ...req,
        ir: withPrefill(req.ir, point.prefill),
        only,
        resumeAt: point.offset,
      }, { deps, runHop, onSettled: this.watch });
      if (!resumed) return null;
      const stop = stopReason(req.live.signal);
      if (stop) return stop;
      if (this.#broken) failure = resumed;
    }
    return failure;
  }
}
