import type { GatewayError } from "../runtime/gateway_error.ts";
import type { AttemptRecord } from "../../db/records.ts";
import type { RouteCandidate } from "../config/schema.ts";
import type { StreamChannel } from "./client_channel.ts";
import { type OnSettled, runCandidates, type RunHop } from "./failover.ts";
import type { ForwardDeps, ForwardRequest } from "./hop.ts";
import {
  RESUME_HELD_CHARS,
  type ResumeMode,
  type ResumeWay,
  type StreamResume,
  withPrefill,
} from "./stream_resume.ts";
import { stopReason } from "./stop_reasons.ts";
import { routeMembers } from "../config/route_entries.ts";

/** How each candidate resumes under a route's `resume_after_content` (docs/liveness.md); null: it does not. */
const WAYS: Record<ResumeMode, (c: RouteCandidate) => ResumeWay | null> = {
  prefill: (c) => (c.accepts_prefill ? "prefill" : null),
  replay: () => "replay",
  auto: (c) => (c.accepts_prefill ? "prefill" : "replay"),
};

/** Candidates that resume the same way, in route order. */
interface Group {
  way: ResumeWay;
  candidates: RouteCandidate[];
}

/** The untried candidates of `mode`, in route order, each run of one way a group. */
export function resumeGroups(
  candidates: readonly RouteCandidate[],
  opts: { mode: ResumeMode; tried: ReadonlySet<string> },
): Group[] {
  const groups: Group[] = [];
  for (const c of candidates) {
    const way = opts.tried.has(c.upstream) ? null : WAYS[opts.mode](c);
    if (!way) continue;
    const last = groups.at(-1);
    if (last?.way === way) last.candidates.push(c);
    else groups.push({ way, candidates: [c] });
  }
  return groups;
}

/**
 * Mid-stream resume (docs/liveness.md). Watches a stream's settled hops to
 * learn which upstreams were tried and whether the last one broke after its
 * content went out; `after` then hands such a break to the route's untried
 * candidates that can resume it, by prefill or by replay, one pass of the candidate loop per
 * run of candidates resuming the same way. Everything else about
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
   * untouched. A break is one to mend when its verdict says so (`resumable`, which the
   * table gives no request that was itself stopped).
   */
  readonly watch: OnSettled = (hop, settled) => {
    this.#tried.add(hop.upstream.id);
    this.#broken = settled.resumable === true;
    if (this.#broken) this.#brokenRow = hop.attempt.record;
  };

  /**
   * After the candidate loop: a stream broken after content is resumed while a
   * capable candidate is left. Answers the error the client's stream ends
   * with, or null when a continuation finished the answer. A resume that never
   * got going ends with the break it tried to mend, never its own failure (a
   * refused prefill, a replay that diverged, is not what went wrong).
   */
  async after(failure: GatewayError | null, runHop: RunHop): Promise<GatewayError | null> {
    const { req } = this;
    const { deps, resume, channel } = this.opts;
    const mode = req.route.resume_after_content;
    while (failure && this.#broken && mode) {
      this.#broken = false;
      if (resume.overflowed) {
        // What the client has was let go at the cap: nothing could continue it exactly.
        deps.log.event("gw.stream.resume_skipped", { held_chars: RESUME_HELD_CHARS });
        return failure;
      }
      const points = resume.points();
      // Pool members in their place: the route stays as it is (its pools keep their picks) and
      // each pass plans only its group's members.
      const groups = resumeGroups(routeMembers(req.route), { mode, tried: this.#tried })
        .filter((g) => points?.[g.way]);
      if (!points || !groups.length) return failure;
      resume.begin(this.#brokenRow);
      for (const { way, candidates } of groups) {
        const prefill = way === "prefill" ? points.prefill! : null;
        const offset = prefill?.offset ?? points.replay!.offset;
        const members = new Set(candidates);
        resume.use(way);
        deps.log.event("gw.stream.resume", { offset, after: failure.code, way });
        channel.startKeepAlives();
        const resumed = await runCandidates({
          ...req,
          ir: prefill ? withPrefill(req.ir, prefill.prefill) : req.ir,
          only: (c) => members.has(c),
          resumeAt: offset,
          ...(prefill ? {} : { replay: true as const }),
        }, { deps, runHop, onSettled: this.watch });
        if (!resumed) return null;
        const stop = stopReason(req.live.signal);
        if (stop) return stop;
        // The continuation broke in turn, after its content: resumed again from the longer answer.
        if (this.#broken) {
          failure = resumed;
          break;
        }
      }
    }
    return failure;
  }
}
