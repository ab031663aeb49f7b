import { REAL_TIME } from "./clock.ts";

/**
 * Resolves after the event loop has had a turn: timers, I/O and other requests run first.
 * Long work on a large client body is cut into such turns (docs/security.md "Deep JSON"), so
 * the serving thread is held once per step rather than for all of them back to back.
 */
export function nextTurn(): Promise<void> {
  return REAL_TIME.sleep(0);
}

/**
 * A client body at least this large has each costly step (decoding, parsing, serialising and
 * encoding it) in a loop turn of its own: at this size one step takes a few milliseconds.
 */
export const OWN_TURN_BYTES = 1024 * 1024;
