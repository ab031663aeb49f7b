import { GatewayError } from "../runtime/gateway_error.ts";
import type { Candidate, ForwardRequest } from "./hop.ts";
import type { FirstContentGate } from "./first_content_gate.ts";

/** The race a lane runs in (hedge_race.ts), as far as the lane needs it. */
export interface LaneOwner {
  readonly req: ForwardRequest;
  /** True for the first lane to claim the answer, which stops every other lane. */
  claim(lane: Lane): boolean;
  /** Whether another lane could still win. */
  contested(): boolean;
}

/**
 * One candidate's run in a race, across its retries: the gate its hops pass
 * at their first content, and the signal that stops them when another lane
 * wins. Its hops hold their usage until they claim the answer, so a loser's
 * tokens stay on its own attempt row.
 */
export class Lane implements FirstContentGate {
  readonly #controller = new AbortController();
  readonly signal: AbortSignal;
  readonly holdsUsage = true;

  constructor(private race: LaneOwner, readonly target: Candidate) {
    this.signal = AbortSignal.any([race.req.live.signal, this.#controller.signal]);
  }

  stop(reason: GatewayError): void {
    this.#controller.abort(reason);
  }

  claim(): boolean {
    return this.race.claim(this);
  }

  get contested(): boolean {
    return this.race.contested();
  }
}

export function hedgeLost(winner?: string): GatewayError {
  const who = winner ? `upstream ${winner}` : "another candidate";
  return new GatewayError(`cancelled: ${who} answered first`, {
    code: "gw.upstream.hedge_lost",
  });
}
