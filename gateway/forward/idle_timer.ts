import type { Clock } from "../runtime/clock.ts";

/** What an idle timer tells the hop it watches (hop.ts): methods, so a hop costs it no closure. */
export interface IdleOwner {
  /** Nothing restarted the timer within its `ms`. */
  idled(): void;
  /** No content came within `firstContentMs` of the start (docs/liveness.md). */
  noFirstContent(): void;
}

/**
 * Fires when nothing restarts it within `ms`. Only content restarts it
 * (docs/design.md "Pulse"); the caller decides what content is. Time spent paused (while a
 * slow client drains what we already have) is not the upstream's silence.
 *
 * It also keeps the hop's first-content timeout (docs/liveness.md), when there is one: the
 * same pending timer, armed for whichever deadline comes first, so a held stream keeps one
 * timer for both (docs/performance_log.md "One object per held stream"). The first content
 * is the first restart; the first-content deadline runs on through a pause, as it always
 * did, and a tie goes to the idle timeout.
 *
 * A restart only moves the deadline; the one pending timer re-arms itself
 * when it finds the deadline moved, so a fast stream costs no timer churn.
 */
export class IdleTimer {
  readonly #clock: Clock;
  readonly #ms: number;
  readonly #owner: IdleOwner;
  #cancel: (() => void) | null = null;
  /** Real (scaled) epoch ms at which silence becomes a timeout; null when stopped or paused. */
  #deadline: number | null = null;
  #pausedLeft: number | null = null;
  /** When the first-content timeout falls; null when off, once content came, or once fired. */
  #firstAt: number | null = null;
  #touched = false;

  constructor(
    clock: Clock,
    opts: { ms: number; owner: IdleOwner; firstContentMs?: number },
  ) {
    this.#clock = clock;
    this.#ms = opts.ms;
    this.#owner = opts.owner;
    if (opts.firstContentMs !== undefined) this.#firstAt = clock.deadline(opts.firstContentMs);
    this.#restart();
  }

  /** Whether content has touched it since it started. */
  get touched(): boolean {
    return this.#touched;
  }

  touch(): void {
    this.#touched = true;
    this.#firstAt = null;
    this.#restart();
  }

  #restart(): void {
    this.#pausedLeft = null;
    this.#deadline = this.#clock.deadline(this.#ms);
    if (!this.#cancel) this.#arm();
  }

  /**
   * Holds the countdown where it is; `resume` continues it. The pending timer
   * stays: firing while paused does nothing, and a deadline moved on by the
   * pause re-arms it, so a write costs no timer churn.
   */
  pause(): void {
    if (this.#deadline === null) return;
    this.#pausedLeft = Math.max(0, this.#deadline - this.#clock.now());
    this.#deadline = null;
  }

  resume(): void {
    if (this.#pausedLeft === null) return;
    this.#deadline = this.#clock.now() + this.#pausedLeft;
    this.#pausedLeft = null;
    if (!this.#cancel) this.#arm();
  }

  /** Stops the idle timeout; a first-content timeout still pending runs on until `close`. */
  stop(): void {
    this.#deadline = null;
    this.#pausedLeft = null;
    if (this.#firstAt === null) this.#disarm();
  }

  /** Stops both timeouts: the hop is over. */
  close(): void {
    this.#firstAt = null;
    this.stop();
  }

  /** The earlier of the two deadlines, or null when neither is pending. */
  #next(): number | null {
    const idle = this.#deadline;
    const first = this.#firstAt;
    if (idle === null) return first;
    return first === null || idle <= first ? idle : first;
  }

  #arm(): void {
    this.#disarm();
    const at = this.#next();
    if (at === null) return;
    const left = Math.max(0, -this.#clock.elapsed(at));
    this.#cancel = this.#clock.after(left, this.#fire);
  }

  /** One closure per timer, not one per arming. */
  readonly #fire = (): void => {
    this.#cancel = null;
    const now = this.#clock.now();
    if (this.#deadline !== null && now >= this.#deadline) {
      this.#deadline = null;
      this.#firstAt = null;
      return this.#owner.idled();
    }
    if (this.#firstAt !== null && now >= this.#firstAt) {
      this.#firstAt = null;
      this.#owner.noFirstContent();
    }
    if (!this.#cancel) this.#arm();
  };

  #disarm(): void {
    this.#cancel?.();
    this.#cancel = null;
  }
}
