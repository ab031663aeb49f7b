import type { Route, RouteCandidate } from "../config/schema.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Candidate, ForwardDeps, ForwardRequest } from "./hop.ts";
import { hedgeLost, Lane, type LaneOwner } from "./hedge_lane.ts";
import { planOf } from "../route/request_plan.ts";
import type { Outcome } from "./failover.ts";

/**
 * Hedged start (docs/liveness.md, "Hedged start"): a candidate silent for
 * `hedge_after_secs` gets the next candidate started beside it. Each runs in
 * its own lane; the first hop to reach its first content claims the race, and
 * every other lane is stopped at once with `hedge_lost`. Until the claim no
 * lane's bytes reach the client (the opening hold), so the client sees one
 * answer from one upstream.
 */
export class HedgeRace implements LaneOwner {
  #lanes = new Map<Lane, Promise<{ lane: Lane; outcome: Outcome }>>();
  #winner: Lane | null = null;
  #decided = false;
  /** The winner's lane ended: the loop goes on without hedging (a whole answer broken mid-body). */
  #over = false;
  #hedges = 0;
  #cancelTimer = () => {};

  private constructor(readonly req: ForwardRequest, readonly deps: ForwardDeps) {}

  /** A race for a plan where some candidate hedges; null keeps the plain loop of docs/design.md. */
  static for(
    req: ForwardRequest,
    opts: { deps: ForwardDeps; plan: Candidate[] },
  ): HedgeRace | null {
    // A route none of whose candidates hedges (most) looks at none of them per request.
    if (!planOf(opts.deps.config, req.route).hedges) return null;
    const hedges = opts.plan.some((c) => hedgeAfterSecs(req.route, c.candidate) !== undefined);
    return hedges ? new HedgeRace(req, opts.deps) : null;
  }

  /**
   * Starts a candidate in a lane of its own and waits for the race to say
   * what happens next: null when the lanes running stayed silent for the
   * candidate's `hedge_after_secs`, so the next candidate starts beside them;
   * otherwise the outcome that ends this step of the loop (the winner's, a
   * caller's error, or the last failure once no lane is left).
   */
  async run(
    target: Candidate,
    opts: { start: (lane: Lane | null) => Promise<Outcome>; release: () => void; more: boolean },
  ): Promise<Outcome | null> {
    if (this.#over) return await opts.start(null);
    if (this.#decided) {
      opts.release();
      return await this.#next(null);
    }
    const lane = new Lane(this, target);
    // `start` never throws: a lane's crashed hop is settled like any other (failover.ts).
    this.#lanes.set(lane, opts.start(lane).then((outcome) => ({ lane, outcome })));
    const secs = hedgeAfterSecs(this.req.route, target.candidate);
    const max = target.candidate.max_hedges ?? this.req.route.max_hedges ?? 1;
    const hedges = opts.more && secs !== undefined && this.#hedges < max;
    return await this.#next(hedges ? this.#hedgeAfter(secs) : null);
  }

  /** Resolves after `secs` of the candidate's silence, unless the race moves on first. */
  #hedgeAfter(secs: number): Promise<typeof SILENT> {
    return new Promise((fire) => {
      this.#cancelTimer = this.deps.clock.after(secs * 1000, () => fire(SILENT));
    });
  }

  /**
   * The loop ran out of candidates to start while lanes still run (the ones
   * after a hedge were full): their outcome, as `run` would have answered it.
   */
  async drain(): Promise<Outcome | null> {
    if (!this.#lanes.size) return null;
    return await this.#next(null);
  }

  /** Waits for the lanes still running; after the loop ends this way, none is left behind. */
  async settle(): Promise<void> {
    this.#cancelTimer();
    await Promise.all(this.#lanes.values());
    this.#lanes.clear();
  }

  async #next(hedge: Promise<typeof SILENT> | null): Promise<Outcome | null> {
    let failed: Outcome | null = null;
    try {
      while (this.#lanes.size) {
        const timer = hedge && !this.#decided ? [hedge] : [];
        const next = await Promise.race([...this.#lanes.values(), ...timer]);
        if (next === SILENT) {
          if (this.#decided) continue;
          this.#hedges++;
          return null;
        }
        this.#lanes.delete(next.lane);
        const { lane, outcome } = next;
        if (this.#decided && lane !== this.#winner) continue;
        if (lane === this.#winner) this.#over = true;
        else if (outcome.step === "next") {
          failed = outcome;
          continue;
        } else this.#decide(null, hedgeLost());
        await this.settle();
        return outcome;
      }
      return failed ?? { step: "next", error: noLane(), resumable: false };
    } finally {
      this.#cancelTimer();
    }
  }

  /** A lane's hop reached its first content: true for the first, which stops all the others. */
  claim(lane: Lane): boolean {
    if (this.#decided) return this.#winner === lane;
    this.#decide(lane, hedgeLost(lane.target.upstream.id));
    return true;
  }

  /** Whether some candidate of the race is still running. */
  get running(): boolean {
    return this.#lanes.size > 0;
  }

  /** Whether a hop's bytes could still lose to another lane's: they must not reach the client. */
  contested(): boolean {
    return !this.#decided && this.#lanes.size > 1;
  }

  #decide(winner: Lane | null, reason: GatewayError): void {
    this.#decided = true;
    this.#winner = winner;
    this.#cancelTimer();
    for (const lane of this.#lanes.keys()) if (lane !== winner) lane.stop(reason);
  }
}

/** The hedge timer's word: the lanes running stayed silent for the candidate's hedge delay. */
const SILENT = Symbol("silent");

/** The hedge delay of a candidate: its own, else its route's; undefined when it does not hedge. */
function hedgeAfterSecs(route: Route, candidate: RouteCandidate): number | undefined {
  return candidate.hedge_after_secs ?? route.hedge_after_secs;
}

function noLane(): GatewayError {
  return new GatewayError("no candidate was started", {
    code: "gw.gateway.internal",
  });
}
