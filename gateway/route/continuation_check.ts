import type { Config } from "../config/schema.ts";
import { configKey } from "../config/config_keys.ts";
import type { IrRequest } from "../formats/ir.ts";
import { clientError, type GatewayError } from "../runtime/gateway_error.ts";
import type { ContinuationOwners } from "./continuation_owners.ts";

/**
 * Refuses a request naming a continuation id or token its key was not handed
 * (docs/design.md "Continuation ids"), before any upstream is asked: every key's
 * request reaches the provider under the gateway's one credential, so the provider would
 * continue another key's conversation for it. One bound to another key and one the gateway
 * never handed out answer the same 404, so a refusal tells nothing of whether the id exists;
 * `keys[].accepts_unseen_continuations` lets a key name the second kind. With no keys (an open
 * gateway on loopback) nothing is checked.
 */
export function checkContinuations(
  ir: IrRequest,
  opts: { keyId: string | null; config: Config; owners?: ContinuationOwners },
): Promise<void> | undefined {
  // Most requests name none: they pay no promise for it, as with guardrails.
  if (opts.keyId === null || !ir.continuations?.length) return undefined;
  return checkNamed(ir.continuations, { ...opts, keyId: opts.keyId });
}

async function checkNamed(
  continuations: NonNullable<IrRequest["continuations"]>,
  opts: { keyId: string; config: Config; owners?: ContinuationOwners },
): Promise<void> {
  const { keyId, owners } = opts;
  const acceptsUnseen = configKey(opts.config, keyId)?.accepts_unseen_continuations === true;
  const checked = new Set<string>();
  for (const { param, value } of continuations) {
    if (checked.has(value)) continue;
    checked.add(value);
    const owner = await owners?.ownerOf(value);
    if (owner === keyId) {
      // Named again by its owner: the binding's age starts over (at most once a day).
      owners?.bind(keyId, [value]);
      continue;
    }
    if (owner === undefined && acceptsUnseen) continue;
    throw unknownContinuation(param);
  }
}

/** Another key's id and one that does not exist, answered alike: nothing tells them apart. */
export function unknownContinuation(param: string): GatewayError {
  return clientError(
    `'${param}' names nothing an upstream of this gateway handed to this key: only an id or ` +
      "token from an answer to this key can continue it; send the whole conversation instead",
    { code: "gw.client.unknown_continuation", param },
  );
}
