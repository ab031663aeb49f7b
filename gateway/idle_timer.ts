import type { Clock } from "./clock.ts";

/**
 * Fires when nothing restarts it within `ms`. Only content restarts it
 * (SPEC §5); the caller decides what content is. Time spent paused (while a
 * slow client drains what we already have) is not the upstream's silence.
 */
export class IdleTimer {
  #cancel: (() => void) | null = null;
  /** When the timer fires, in real (scaled) epoch ms; null while stopped. */
  #due: number | null = null;
  #pausedLeft: number | null = null;

  constructor(private clock: Clock, private opts: { ms: number; onIdle: () => void }) {
    this.touch();
  }

  touch(): void {
    this.#arm(this.opts.ms);
  }

  /** Holds the countdown where it is; `resume` continues it. */
  pause(): void {
    if (this.#due === null || this.#pausedLeft !== null) return;
    this.#pausedLeft = Math.max(0, this.clock.unscale(this.#due - this.clock.now()));
    this.#clear();
  }

  resume(): void {
    if (this.#pausedLeft === null) return;
    const left = this.#pausedLeft;
    this.#pausedLeft = null;
    this.#arm(left);
  }

  stop(): void {
    this.#pausedLeft = null;
    this.#clear();
  }

  #arm(ms: number): void {
    this.#clear();
    this.#pausedLeft = null;
    this.#due = this.clock.now() + ms * this.clock.scale;
    this.#cancel = this.clock.after(ms, () => {
      this.#clear();
      this.opts.onIdle();
    });
  }

  #clear(): void {
    this.#cancel?.();
    this.#cancel = null;
    this.#due = null;
  }
}
