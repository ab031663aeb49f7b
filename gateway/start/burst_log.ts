import { REAL_TIME, workMs } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

/**
 * One log line per burst of a repeated event (docs/deploy.md "Connection limits"). The first
 * occurrence is logged at once; later ones only as a count, at most once per `everyMs` while the
 * burst lasts; and when none has come for `quietMs` the burst is over and `endEvent` says how many
 * there were and how long it lasted. A flood of accept errors or refused connections costs a few
 * lines, not one per connection.
 */
export class BurstLog {
  #count = 0;
  #unlogged = 0;
  #startedAt = 0;
  #lastAt = 0;
  #loggedAt = 0;
  #quiet: (() => void) | undefined;

  constructor(
    private readonly log: Logger,
    private readonly opts: {
      /** Logged at the start of a burst and as a reminder while it lasts. */
      event: string;
      /** Logged once the burst is over, with its count and length and `endFields()`. */
      endEvent: string;
      everyMs: number;
      quietMs: number;
      endFields?: () => Record<string, unknown>;
    },
  ) {}

  hit(fields: Record<string, unknown> = {}): void {
    const now = workMs();
    this.#count++;
    this.#lastAt = now;
    if (this.#count === 1) {
      this.#startedAt = this.#loggedAt = now;
      this.log.event(this.opts.event, fields);
      this.#armQuiet();
      return;
    }
    this.#unlogged++;
    if (now - this.#loggedAt < this.opts.everyMs) return;
    this.log.event(this.opts.event, { ...fields, since_last_line: this.#unlogged });
    this.#unlogged = 0;
    this.#loggedAt = now;
  }

  /** Logs the end of a burst under way, if any, and stops the timer. */
  close(): void {
    this.#quiet?.();
    this.#quiet = undefined;
    this.#end();
  }

  #armQuiet(): void {
    const wait = this.#lastAt + this.opts.quietMs - workMs();
    // Real time: a log line's quiet period, which nothing waits on.
    this.#quiet = REAL_TIME.after(Math.max(0, wait), () => {
      this.#quiet = undefined;
      if (workMs() - this.#lastAt < this.opts.quietMs) return this.#armQuiet();
      this.#end();
    }, { unref: true });
  }

  #end(): void {
    if (this.#count === 0) return;
    this.log.event(this.opts.endEvent, {
      ...this.opts.endFields?.(),
      count: this.#count,
      ms: Math.round(this.#lastAt - this.#startedAt),
    });
    this.#count = this.#unlogged = 0;
  }
}
