import { REAL_TIME } from "./clock.ts";

let turning = 0;

/**
 * Resolves after the event loop has had a turn: timers, I/O and other requests run first.
 * Long work on a large client body is cut into such turns (docs/security.md "Deep JSON"), so
 * the serving thread is held once per step rather than for all of them back to back.
 */
export function nextTurn(): Promise<void> {
  turning++;
  return REAL_TIME.sleep(0).finally(() => turning--);
}

/**
 * Loop turns awaited now. A turn is the process's own work, not a wait: a virtual clock
 * (tests/virtual_clock.ts) holds its time still while one is pending, so a large body's parse
 * takes no virtual time, as it takes none of the clock's in production.
 */
export function turnsPending(): number {
  return turning;
}

/**
 * A client body at least this large has each costly step (decoding, parsing, serialising and
 * encoding it) in a loop turn of its own: at this size one step takes a few milliseconds.
 */
export const OWN_TURN_BYTES = 1024 * 1024;
