import type { Config, Route, RouteCandidate, Upstream } from "../config/schema.ts";
import type { ClientCodec, UpstreamAdapter, UpstreamKind } from "../formats/format.ts";
import type { IrRequest } from "../formats/ir.ts";
import type { EmbedRequest } from "../formats/embeddings.ts";
import type { Affinity } from "./affinity.ts";
import type { Cooldowns } from "./cooldown.ts";
import type { Slots } from "./slots.ts";
import type { InteractionHomes } from "./interaction_homes.ts";
import type { ContinuationOwners } from "./continuation_owners.ts";
import type { Pools, PoolSlot } from "./pools.ts";

/**
 * What routing knows of a request and of the state it shares with others: the
 * request's types live here, below the stage that forwards it
 * (gateway/forward/hop.ts extends them), so route/ never imports forward/.
 */

/** One candidate of a route, with its upstream. */
export interface Candidate {
  upstream: Upstream;
  candidate: RouteCandidate;
  /** Set when it is a member of a pool (docs/design.md "Pools"). */
  pool?: PoolSlot;
  /**
   * Its member's or its upstream's pause is over and not yet confirmed (half-open,
   * docs/design.md "Cooldown"): it is tried only by the one request that claims its probe.
   */
  probe?: boolean;
}

/** The request path's shared state, as far as choosing candidates needs it. */
export interface RouteDeps {
  config: Config;
  adapters: Record<UpstreamKind, UpstreamAdapter>;
  cooldowns: Cooldowns;
  slots: Slots;
  affinity: Affinity;
  /** Which upstream stores each interaction (docs/interactions.md "Stored interactions"). */
  homes?: InteractionHomes;
  /** Which key each continuation id or token was handed to (docs/design.md "Continuation ids"). */
  owners?: ContinuationOwners;
  pools: Pools;
}

/** A request, as far as choosing its candidates needs it. */
export interface RoutedRequest {
  ir: IrRequest;
  codec: ClientCodec;
  route: Route;
  /**
   * A mid-stream resume's request (docs/liveness.md): where its hops pick the
   * answer up, in characters the client already has. The prefill is in the
   * IR, so it is always translated.
   */
  resumeAt?: number;
  /**
   * A resume by replay (docs/liveness.md, "Replay"): the original request, without a
   * prefill, sent as the first hop's was; its answer is held until it matches what the client has.
   */
  replay?: true;
  /**
   * The one upstream this request may go to: the one storing the interaction it continues
   * (docs/interactions.md "Stored interactions"); any other candidate is passed over.
   */
  pin?: string;
  /**
   * An embeddings request (docs/providers.md "Embeddings"): what its candidates are asked, in
   * place of a generation; `ir` then holds only its route and its text.
   */
  embed?: EmbedRequest;
  /**
   * A narrowed pass of the loop (mid-stream resume): only the route's candidates this keeps
   * are planned, each pool still ordered by its pick.
   */
  only?: (candidate: RouteCandidate) => boolean;
}
