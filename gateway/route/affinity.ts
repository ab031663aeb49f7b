import { type Clock, REAL_TIME } from "../runtime/clock.ts";
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
 * How long a pin outlives the session's last answer: an hour, the longest a provider keeps a
 * prompt cache warm unread (Anthropic's and Bedrock's `ttl: "1h"`; OpenAI's in-memory caches go
 * sooner). Past it no upstream holds the cache, so the route's own order applies again: a
 * session that failed over once does not stay on the fallback for ever.
 */
export const PIN_IDLE_MS = 60 * 60 * 1000;

/**
 * Keeps a session on the upstream that last answered it (docs/design.md "Client API"), so a
 * conversation's prompt cache stays warm (docs/observability.md "Cache-aware affinity"). Per
 * route: the same session id on another route (a coding agent's side calls to a small model,
 * say) has its own candidates and must not be pulled to this route's upstream. Bounded: the
 * oldest pins go first, and a pin unused for PIN_IDLE_MS of clock time is forgotten.
 */
export class Affinity {
  #pins = new Map<string, { upstream: string; at: number }>();

  constructor(
    private max = 100_000,
    private opts: { clock?: Clock; idleMs?: number } = {},
  ) {}

  get(route: string, sessionId: string | null): string | undefined {
    if (sessionId === null) return undefined;
    const k = key(route, sessionId);
    const pin = this.#pins.get(k);
    if (!pin) return undefined;
    if (this.#clock().elapsed(pin.at) > (this.opts.idleMs ?? PIN_IDLE_MS)) {
      this.#pins.delete(k);
      return undefined;
    }
    return pin.upstream;
  }

  set(route: string, pin: AffinityPin): void {
    if (pin.sessionId === null) return;
    const k = key(route, pin.sessionId);
    this.#pins.delete(k);
    this.#pins.set(k, { upstream: pin.upstream, at: this.#clock().now() });
    if (this.#pins.size > this.max) {
      const oldest = this.#pins.keys().next().value;
      if (oldest !== undefined) this.#pins.delete(oldest);
    }
  }

  /** Forgets the pin only if it still names this upstream. */
  drop(route: string, pin: AffinityPin): void {
    if (pin.sessionId === null) return;
    const k = key(route, pin.sessionId);
    if (this.#pins.get(k)?.upstream === pin.upstream) this.#pins.delete(k);
  }

  #clock(): Clock {
    return this.opts.clock ?? REAL_TIME;
  }
}

// JSON keeps the pair unambiguous whatever either string holds.
function key(route: string, sessionId: string): string {
  return JSON.stringify([route, sessionId]);
}
