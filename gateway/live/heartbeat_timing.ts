import { type Clock, nowSpan } from "../runtime/clock.ts";

/** How often each instance marks itself alive (gateway/start/instance_heartbeat.ts). */
export const HEARTBEAT_MS = 10_000;
/** An instance silent for three beats is taken as gone, and its open rows as interrupted. */
const STALE_AFTER_BEATS = 3;

/**
 * How long an instance may stay silent and still count as live, as the span of `now()` values it
 * covers (what the instances table's timestamps are compared with).
 */
export function staleAfterMs(clock: Clock): number {
  return nowSpan(clock, HEARTBEAT_MS * STALE_AFTER_BEATS);
}
