import type { Clock } from "./clock.ts";

/**
 * Fires when nothing restarts it within `ms`. Only content restarts it
 * (SPEC §5); the caller decides what content is.
 */
export class IdleTimer {
  #cancel: (() => void) | null = null;

  constructor(private clock: Clock, private opts: { ms: number; onIdle: () => void }) {
    this.touch();
  }

  touch(): void {
    this.#cancel?.();
    this.#cancel = this.clock.after(this.opts.ms, () => {
      this.#cancel = null;
      this.opts.onIdle();
    });
  }

  stop(): void {
    this.#cancel?.();
    this.#cancel = null;
  }
}
