import { REAL_TIME } from "./clock.ts";

let turning = 0;

/**
 * Resolves after the event loop has had a turn: timers, I/O and other requests run first.
 * Long work on a large client body is cut into such turns (docs/security.md "Deep JSON"), so
 * the serving thread is held once per step rather than for all of them back to back.
 */
export function nextTurn(): Promise<void> {
  return realPause(0);
}

/**
 * Waits `ms` of real time, whatever the clock's pace: room for work outside the clock's
 * business (a real client reading one write before the next, gateway/forward/client_channel.ts).
 * Counted with the loop turns.
 */
export function realPause(ms: number): Promise<void> {
  turning++;
  return REAL_TIME.sleep(ms).finally(() => turning--);
}

/**
 * Loop turns and real pauses awaited now. Each is the process's own work, not a wait of the
 * clock's: a virtual clock (tests/virtual_clock.ts) holds its time still while one is pending,
 * so a large body's parse takes no virtual time, as it takes none of the clock's in production.
 */
export function turnsPending(): number {
  return turning;
}

/**
 * A client body at least this large has each costly step (decoding, parsing, serialising and
 * encoding it) in a loop turn of its own: at this size one step takes a few milliseconds.
 */
export const OWN_TURN_BYTES = 1024 * 1024;
