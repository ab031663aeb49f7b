import { isRecord } from "../runtime/json.ts";
import type { LiveRequest } from "./live_request.ts";

/**
 * Whom an abort acts for: the operator (admin token), who may stop anything, or one gateway
 * key, which may stop only its own requests. A session belongs to the key that named it: the
 * same session id under two keys is two sessions (docs/security.md, "Sessions are per key").
 */
export type AbortScope = { admin: true } | { admin: false; keyId: string };

export function mayAbort(scope: AbortScope, live: LiveRequest): boolean {
  return scope.admin || live.record.keyId === scope.keyId;
}

/** The scope a peer sent in its signed body; null when it is not one. */
export function scopeFromJson(value: unknown): AbortScope | null {
  if (!isRecord(value)) return null;
  if (value.admin === true) return { admin: true };
  if (value.admin === false && typeof value.keyId === "string" && value.keyId !== "") {
    return { admin: false, keyId: value.keyId };
  }
  return null;
}
