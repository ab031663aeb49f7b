import { passesBodyThrough } from "../route/passthrough.ts";
import type { Hop } from "./hop.ts";

/**
 * The most handles one answer binds. A Responses answer names a few (its id, its items, a
 * conversation), an Interactions stream a token per checkpoint; a hostile upstream could send
 * thousands, each a write. Past this, the rest are bound to nobody, so under keys a later
 * request naming one is refused as unseen (docs/design.md "Continuation ids").
 */
export const MAX_CONTINUATIONS_PER_ANSWER = 64;

/**
 * Binds the continuation ids and tokens a hop's upstream handed back to the key whose request
 * it answered (gateway/route/continuation_owners.ts), as they pass: only where the upstream was
 * sent the client's own body (a translation's answer names nothing the client can send back;
 * the handles are in the client's format), the provider keeps what they name
 * (`IrRequest.answerContinues`), and the gateway has keys (open, nothing is checked either).
 * Each handle once per hop.
 */
export function bindContinuations(hop: Hop, handles: readonly string[] | undefined): void {
  if (!handles?.length) return;
  const { req } = hop;
  const keyId = req.live.record.keyId;
  const owners = hop.opts.deps.owners;
  if (keyId === null || !owners || req.ir.answerContinues !== true) return;
  if (!passesBodyThrough(req, hop.upstream.kind)) return;
  const continuations = hop.continuations ??= { bound: new Set(), capped: false };
  const { bound } = continuations;
  const fresh: string[] = [];
  for (const handle of handles) {
    if (bound.has(handle)) continue;
    if (bound.size >= MAX_CONTINUATIONS_PER_ANSWER) {
      if (!continuations.capped) {
        continuations.capped = true;
        hop.opts.deps.log.event("continuation_owner.over_cap", {
          upstream: hop.upstream.id,
          cap: MAX_CONTINUATIONS_PER_ANSWER,
        });
      }
      break;
    }
    bound.add(handle);
    fresh.push(handle);
  }
  if (fresh.length) owners.bind(keyId, fresh);
}
