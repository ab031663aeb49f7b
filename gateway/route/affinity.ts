/** A session's pin to the upstream that last answered it. */
export interface AffinityPin {
  sessionId: string | null;
  upstream: string;
}

/**
 * A request's session as affinity keys it: a session belongs to the key that named it, so the
 * same session id under two keys is two sessions and one key cannot steer or learn another's
 * pin (docs/security.md, "Sessions are per key"). Null without a session.
 */
export function affinitySession(
  owner: { keyId: string | null; sessionId: string | null },
): string | null {
  return owner.sessionId === null ? null : JSON.stringify([owner.keyId, owner.sessionId]);
}

/**
 * Keeps a session on the upstream that last answered it (docs/design.md "Client API"), so a
 * conversation's prompt cache stays warm. Per route: the same session id on
 * another route (a coding agent's side calls to a small model, say) has its
 * own candidates and must not be pulled to this route's upstream. Bounded:
 * the oldest pins go first.
 */
export class Affinity {
  #pins = new Map<string, string>();

  constructor(private max = 100_000) {}

  get(route: string, sessionId: string | null): string | undefined {
    return sessionId === null ? undefined : this.#pins.get(key(route, sessionId));
  }

  set(route: string, pin: AffinityPin): void {
    if (pin.sessionId === null) return;
    const k = key(route, pin.sessionId);
    this.#pins.delete(k);
    this.#pins.set(k, pin.upstream);
    if (this.#pins.size > this.max) {
      const oldest = this.#pins.keys().next().value;
      if (oldest !== undefined) this.#pins.delete(oldest);
    }
  }

  /** Forgets the pin only if it still names this upstream. */
  drop(route: string, pin: AffinityPin): void {
    if (pin.sessionId === null) return;
    const k = key(route, pin.sessionId);
    if (this.#pins.get(k) === pin.upstream) this.#pins.delete(k);
  }
}

// JSON keeps the pair unambiguous whatever either string holds.
function key(route: string, sessionId: string): string {
  return JSON.stringify([route, sessionId]);
}
