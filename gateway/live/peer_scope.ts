import { isRecord, parseJson } from "../runtime/json.ts";
import { type AbortScope, scopeFromJson } from "./abort_scope.ts";
import {
  PEER_BODY_MAX_BYTES,
  PEER_SIGNATURE_HEADER,
  PEER_SIGNATURE_WINDOW_MS,
  verifyPeerCall,
} from "./peer_signature.ts";
import { joinBytes } from "../runtime/join_bytes.ts";

/**
 * Signatures already honoured, until their window closes: a call copied off the wire cannot be
 * played again to this instance while it runs (a restarted one has a new id, which the copy does
 * not name). Bounded by the window: at most the calls of the last minute.
 */
export class SeenSignatures {
  #until = new Map<string, number>();

  /** True the first time a signature is seen within its window. */
  fresh(signature: string, now: number): boolean {
    for (const [seen, until] of this.#until) {
      if (until >= now) break;
      this.#until.delete(seen);
    }
    if (this.#until.has(signature)) return false;
    this.#until.set(signature, now + 2 * PEER_SIGNATURE_WINDOW_MS);
    return true;
  }
}

/** A forwarded abort as its signed body says: the scope it acts for, and what else it carries. */
export interface ForwardedCall {
  scope: AbortScope;
  /** The session fence its sender made (docs/scaling.md "Fences"), unchecked; absent if none. */
  fence?: unknown;
  /** The whole signed body, for calls that carry more (a live page's query), unchecked. */
  body?: Record<string, unknown>;
}

/**
 * The scope a forwarded abort acts for, read from its signed body; null when the call is not
 * signed with this instance's peer secret (or there is none), is stale, is addressed to another
 * instance (`to`, the receiver's id, new at every start), was already honoured, or names no
 * scope. Credential headers on it are ignored: an instance never vouches for a caller by passing
 * on its key (docs/scaling.md).
 */
export async function peerScope(
  request: Request,
  opts: { secret: string | undefined; now: number; seen: SeenSignatures; self: string },
): Promise<ForwardedCall | null> {
  if (!opts.secret) return null;
  const body = await boundedText(request);
  if (body === null) return null;
  const call = { method: request.method, path: new URL(request.url).pathname, body };
  const valid = await verifyPeerCall({ ...call, headers: request.headers }, {
    secret: opts.secret,
    now: opts.now,
  });
  if (!valid) return null;
  const parsed = parseJson(body);
  // Signed for another instance, or for this address before a restart: a copy, not a call to us.
  if (!isRecord(parsed) || parsed.to !== opts.self) return null;
  if (!opts.seen.fresh(request.headers.get(PEER_SIGNATURE_HEADER) ?? "", opts.now)) return null;
  const scope = scopeFromJson(parsed.scope);
  return scope && { scope, fence: parsed.fence ?? undefined, body: parsed };
}

/** The body as text, or null past the bound: read no further than that, whatever it claims. */
async function boundedText(request: Request): Promise<string | null> {
  if (!request.body) return "";
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      size += r.value.byteLength;
      if (size > PEER_BODY_MAX_BYTES) return null;
      chunks.push(r.value);
    }
  } catch {
    return null;
  } finally {
    reader.cancel().catch(() => {});
  }
  return joinBytes(chunks);
}
