import type { GatewayKey } from "../config/schema.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Metrics } from "../runtime/metrics.ts";

/**
 * Requests in progress per gateway key, against `keys[].max_in_flight` (docs/security.md
 * "Request bodies and per-key concurrency"). A place is taken at admission, before the body
 * is read, and given back when the request's row closes (streams included; an embeddings
 * answer when its client has read it: gateway/accept/held_answer.ts), so one key cannot
 * hold more of the gateway than its share however slowly it sends or reads. Counted per
 * process; every keyed request is counted, limited or not, for the
 * `pulsegate_key_in_flight_requests` gauge.
 */
export class KeyInFlight {
  #counts = new Map<string, number>();

  constructor(private metrics: Metrics) {}

  count(keyId: string): number {
    return this.#counts.get(keyId) ?? 0;
  }

  /** The release of one place, or the 429 when the key already holds `max_in_flight`. */
  take(key: GatewayKey): (() => void) | GatewayError {
    const held = this.count(key.id);
    if (key.max_in_flight !== undefined && held >= key.max_in_flight) {
      return new GatewayError(
        `key '${key.id}' already has ${held} requests in progress, its max_in_flight`,
        // A place frees when one of them ends, which nothing here can foretell: a short hint.
        { code: "gw.key.max_in_flight", retryAfterSecs: 1 },
      );
    }
    this.#move(key.id, 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#move(key.id, -1);
    };
  }

  #move(keyId: string, by: 1 | -1): void {
    const next = this.count(keyId) + by;
    if (next === 0) this.#counts.delete(keyId);
    else this.#counts.set(keyId, next);
    this.metrics.keyInFlight.inc({ key: keyId }, by);
  }
}
