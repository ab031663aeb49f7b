import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";

/**
 * Whether the history database has been prepared (migrated, this instance registered), and the
 * retry of that preparation while it has not: a remote database that is away at start, or none
 * at all on a platform that cannot open a local file. Nothing retries on its own timer: the
 * history writer's backoff and the heartbeat call `ensure`, so retries follow their pace.
 */
export class DatabaseReadiness {
  #ready = false;
  #trying: Promise<boolean> | null = null;
  #failure: unknown = null;
  #since: number | null = null;
  readonly #onReady: (() => Promise<void>)[] = [];

  constructor(
    private readonly prepare: () => Promise<void>,
    private readonly opts: {
      clock: Clock;
      log: Logger;
      /** Set when no database exists to wait for: `ensure` then never tries. */
      absent?: string;
    },
  ) {}

  get ready(): boolean {
    return this.#ready;
  }

  /** Why the last preparation failed; null once ready. */
  get failure(): unknown {
    return this.#failure;
  }

  /** Runs once the database is prepared, before anything else may write (stored state, rows). */
  onReady(fn: () => Promise<void>): void {
    this.#onReady.push(fn);
  }

  /** True once prepared; otherwise tries once more (one try at a time) and says how it went. */
  ensure(): Promise<boolean> {
    if (this.#ready) return Promise.resolve(true);
    if (this.opts.absent !== undefined) return Promise.resolve(false);
    return this.#trying ??= this.#try().finally(() => this.#trying = null);
  }

  /** One line for /readyz and the log; null while the database serves. */
  describe(): string | null {
    if (this.#ready) return null;
    if (this.opts.absent !== undefined) return `no database: ${this.opts.absent}`;
    const since = this.#since === null ? "" : ` since ${new Date(this.#since).toISOString()}`;
    return `history database unreachable${since}: ${errorText(this.#failure)}`;
  }

  async #try(): Promise<boolean> {
    try {
      await this.prepare();
      for (const fn of this.#onReady) await fn();
    } catch (err) {
      const first = this.#failure === null;
      this.#failure = err;
      this.#since ??= this.opts.clock.now();
      if (first) this.opts.log.event("history.database_unreachable", { error: errorText(err) });
      return false;
    }
    if (this.#since !== null) {
      this.opts.log.event("history.database_back", {
        down_ms: this.opts.clock.now() - this.#since,
      });
    }
    this.#ready = true;
    this.#failure = null;
    this.#since = null;
    return true;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
