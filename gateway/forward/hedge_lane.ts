import type { IrUsage } from "../formats/ir.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { ForwardRequest, Hop } from "./hop.ts";

/** The race a lane runs in (hedge_race.ts), as far as the lane needs it. */
export interface LaneOwner {
  readonly req: ForwardRequest;
  /** True for the first hop to claim the answer, which stops every other lane. */
  claim(lane: Lane, hop: Hop): boolean;
  /** Whether another lane could still win. */
  contested(): boolean;
}

/**
 * One candidate's run in a race, across its retries: the hop it has in
 * flight, and the usage that hop reported before it won (kept off the
 * request's row until then, so a loser's tokens stay on its own attempt).
 */
export class Lane {
  readonly #controller = new AbortController();
  readonly signal: AbortSignal;
  #hop: Hop | null = null;
  #pending: IrUsage[] = [];
  #won = false;

  constructor(private race: LaneOwner) {
    this.signal = AbortSignal.any([race.req.live.signal, this.#controller.signal]);
  }

  join(hop: Hop): void {
    this.#hop = hop;
    this.#pending = [];
    if (this.#controller.signal.aborted) hop.controller.abort(this.#controller.signal.reason);
  }

  leave(hop: Hop): void {
    if (this.#hop === hop) this.#hop = null;
  }

  stop(reason: GatewayError): void {
    this.#controller.abort(reason);
    this.#hop?.controller.abort(reason);
  }

  /** First content on `hop`: true when it won. */
  claim(hop: Hop): boolean {
    if (!this.race.claim(this, hop)) return false;
    this.#won = true;
    for (const usage of this.#pending.splice(0)) hop.attempt.usage(usage);
    return true;
  }

  contested(): boolean {
    return this.race.contested();
  }

  usage(hop: Hop, usage: IrUsage): void {
    if (this.#won) return hop.attempt.usage(usage);
    const record = hop.attempt.record;
    record.inputTokens = usage.inputTokens ?? record.inputTokens;
    record.outputTokens = usage.outputTokens ?? record.outputTokens;
    this.#pending.push(usage);
  }

  /**
   * Records a hop stopped because another won: outcome `hedge_lost`, not a
   * failure for cooldown, with the tokens it billed as far as known (its
   * usage ledger estimates what it received but did not report).
   */
  lost(hop: Hop, reason: GatewayError): void {
    hop.end("hedge_lost", reason);
  }
}

export function hedgeLost(winner?: string): GatewayError {
  const who = winner ? `upstream ${winner}` : "another candidate";
  return new GatewayError(`cancelled: ${who} answered first`, {
    code: "gw.upstream.hedge_lost",
  });
}
