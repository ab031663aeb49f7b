import type { Config, Route, Upstream } from "../config/schema.ts";
import { routeMembers } from "../config/route_entries.ts";
import { echoed } from "../formats/bounded_names.ts";
import type { IrRequest } from "../formats/ir.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import type { InteractionHome, InteractionHomes } from "./interaction_homes.ts";
import { passesBodyThrough } from "./passthrough.ts";
import type { RoutedRequest } from "./route_request.ts";

/** The upstream kind that stores interactions (docs/interactions.md "Stored interactions"). */
const STORING_KIND = "gemini-interactions";

/**
 * The one upstream a request continuing a stored interaction may go to: the one that stored
 * it, which alone holds its history (docs/interactions.md "Stored interactions"). Undefined when the
 * request continues nothing. Never a silent answer without its history: when that upstream
 * cannot be used the request fails here, saying why, and no other candidate is tried.
 */
export async function interactionPin(
  ir: IrRequest,
  opts: { route: Route; keyId: string | null; config: Config; homes?: InteractionHomes },
): Promise<string | undefined> {
  const id = ir.providerState?.continues;
  if (id === undefined) return undefined;
  const home = await opts.homes?.find(opts.keyId, id);
  if (!home) throw unknownInteraction(id, "previous_interaction_id");
  const usable = homeUpstream(home, opts.config);
  // A pool's members count as the route's candidates (docs/design.md "Pools").
  const candidate = routeMembers(opts.route).find((c) => c.upstream === home.upstream);
  if (!candidate && home.route === opts.route.model) {
    throw homeUnavailable(id, { upstream: home.upstream, route: opts.route.model });
  }
  if (!candidate) {
    throw clientError(
      `interaction ${echoed(id)} is stored on an upstream of route '${home.route}' that ` +
        `route '${opts.route.model}' does not use, and only that upstream holds its history: ` +
        `continue it on route '${home.route}'`,
      { code: "gw.client.interaction_elsewhere", param: "model" },
    );
  }
  if (!usable || !candidate.enabled) {
    throw homeUnavailable(id, { upstream: home.upstream, route: opts.route.model });
  }
  return home.upstream;
}

/** The upstream holding an interaction, if it is still configured, enabled and storing. */
export function homeUpstream(home: InteractionHome, config: Config): Upstream | undefined {
  const upstream = config.upstreams.find((u) => u.id === home.upstream);
  return upstream?.enabled && upstream.kind === STORING_KIND ? upstream : undefined;
}

/** An id this key has no record of: answered like one that does not exist (docs/security.md). */
export function unknownInteraction(id: string, param?: string): GatewayError {
  return clientError(
    `interaction ${echoed(id)} is not stored by any upstream of this gateway for this key: ` +
      "only an interaction answered by a gemini-interactions upstream with 'store' on can be " +
      "continued or fetched; send the whole conversation as 'input' instead",
    { code: "gw.client.unknown_interaction", param },
  );
}

export function homeUnavailable(
  id: string,
  at: { upstream: string; route?: string },
): GatewayError {
  const where = at.route === undefined ? "" : ` on route '${at.route}'`;
  return new GatewayError(
    `interaction ${echoed(id)} is stored on upstream '${at.upstream}', which is not enabled` +
      `${where} now; it is not sent to another upstream, which would answer without its history`,
    { code: "gw.upstream.interaction_home_unavailable" },
  );
}

/** Why a candidate other than the pinned one is passed over, for the client's error. */
export function notHome(req: Pick<RoutedRequest, "ir">): string {
  return `does not store interaction ${echoed(req.ir.providerState?.continues ?? "")}`;
}

/**
 * Whether the answer `upstream` gives this request is stored there under the id it names: an
 * Interactions upstream sent the client's own body with `store` on. A translation is sent
 * `store: false` and carries its history itself.
 */
export function answerIsStored(
  req: Pick<RoutedRequest, "ir" | "codec" | "resumeAt">,
  upstream: Upstream,
): boolean {
  return req.ir.providerState?.stores === true && upstream.kind === STORING_KIND &&
    passesBodyThrough(req, upstream.kind);
}
