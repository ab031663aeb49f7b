import type { Clock } from "../runtime/clock.ts";

/**
 * Fires when nothing restarts it within `ms`. Only content restarts it
 * (docs/design.md "Pulse"); the caller decides what content is. Time spent paused (while a
 * slow client drains what we already have) is not the upstream's silence.
 *
 * A restart only moves the deadline; the one pending timer re-arms itself
 * when it finds the deadline moved, so a fast stream costs no timer churn.
 */
export class IdleTimer {
  #cancel: (() => void) | null = null;
  /** Real (scaled) epoch ms at which silence becomes a timeout; null when stopped or paused. */
  #deadline: number | null = null;
  #pausedLeft: number | null = null;
  #touched = false;

  constructor(private clock: Clock, private opts: { ms: number; onIdle: () => void }) {
    this.#restart();
  }

  /** Whether content has touched it since it started: the first-content timer asks. */
  get touched(): boolean {
    return this.#touched;
  }

  touch(): void {
    this.#touched = true;
    this.#restart();
  }

  #restart(): void {
    this.#pausedLeft = null;
    this.#deadline = this.clock.deadline(this.opts.ms);
    if (!this.#cancel) this.#arm();
  }

  /**
   * Holds the countdown where it is; `resume` continues it. The pending timer
   * stays: firing while paused does nothing, and a deadline moved on by the
   * pause re-arms it, so a write costs no timer churn.
   */
  pause(): void {
    if (this.#deadline === null) return;
    this.#pausedLeft = Math.max(0, this.#deadline - this.clock.now());
    this.#deadline = null;
  }

  resume(): void {
    if (this.#pausedLeft === null) return;
    this.#deadline = this.clock.now() + this.#pausedLeft;
    this.#pausedLeft = null;
    if (!this.#cancel) this.#arm();
  }

  stop(): void {
    this.#deadline = null;
    this.#pausedLeft = null;
    this.#disarm();
  }

  #arm(): void {
    this.#disarm();
    if (this.#deadline === null) return;
    const left = Math.max(0, -this.clock.elapsed(this.#deadline));
    this.#cancel = this.clock.after(left, () => {
      this.#cancel = null;
      if (this.#deadline === null) return;
      if (this.clock.now() < this.#deadline) return this.#arm();
      this.#deadline = null;
      this.opts.onIdle();
    });
  }

  #disarm(): void {
    this.#cancel?.();
    this.#cancel = null;
  }
}
