import type { Cooldowns, ProbeTicket } from "../route/cooldown.ts";
import type { Metrics } from "../runtime/metrics.ts";
import type { ProbeEnd } from "./verdict.ts";

/**
 * The probes of a half-open candidate's levels one request holds (docs/design.md "Cooldown"),
 * given back exactly once, by `end`, as the verdict table says of how the probe ended
 * (`probeEnd` in verdict.ts): when its hop settles, or unsent when the loop leaves the candidate
 * without sending it (a `using` in failover.ts). Once a hop took it, only that hop's settling
 * ends it.
 */
export class ProbeHold {
  #sent = false;
  #ended = false;

  constructor(
    readonly tickets: readonly ProbeTicket[],
    readonly opts: { upstream: string; deps: { cooldowns: Cooldowns; metrics: Metrics } },
  ) {}

  /** A hop took it: the loop's "unsent" no longer ends it. */
  send(): void {
    this.#sent = true;
  }

  /** Gives the probes back (a success or failure settled a level already: nothing then). */
  end(result: ProbeEnd): void {
    if (this.#ended || (result === "unsent" && this.#sent)) return;
    this.#ended = true;
    const { cooldowns, metrics } = this.opts.deps;
    if (result !== "unsent") metrics.probes.inc({ upstream: this.opts.upstream, result });
    for (const ticket of this.tickets) cooldowns.probeEnded(ticket);
  }

  /** The loop leaves the candidate (`using`): a probe no hop took goes back, uncounted. */
  [Symbol.dispose](): void {
    this.end("unsent");
  }
}
