import type { InStatement } from "@libsql/client";
import type { Db } from "./client.ts";
import {
  DAY_MS,
  freePages,
  PRUNE_BATCH,
  pruneInstances,
  pruneRequestsStep,
  pruneRollupStep,
  pruneSummariesStep,
  ROLLUP_MINUTES_PER_STEP,
  type RollupTable,
  VACUUM_PAGES,
  vacuumStep,
} from "./history_retention.ts";

/** Where upkeep runs: between the history writer's batches (db/history_writer.ts `upkeep`). */
export interface Upkeep {
  upkeep(statements: InStatement[]): Promise<number[]>;
}

export interface RetentionPolicy {
  retentionDays: number;
  rollupRetentionDays: number;
}

export interface HistoryPrunerOptions {
  writer: Upkeep;
  /** The gateway's clock: `now` in epoch ms, `after` in configured (unscaled) ms. */
  clock: { now(): number; after(ms: number, fn: () => void): () => void };
  /** Read at each run, so a config saved meanwhile applies at the next one. */
  policy: () => RetentionPolicy;
  /**
   * The start (epoch ms) of the oldest request some export destination has not received yet,
   * or null: no row from then on is removed until it has been (docs/scaling.md "Retention").
   */
  holdFrom?: () => number | null;
  /** Tables of per-minute rollups, kept `rollupRetentionDays`. */
  rollups?: readonly RollupTable[];
  /** Reclaim free pages after each run (a local file with auto_vacuum=incremental). */
  vacuum?: boolean;
  /** Between runs; default a minute. */
  everyMs?: number;
  batch?: number;
  vacuumPages?: number;
  onError?: (err: unknown) => void;
}

/** What the last run did, for /admin/api/history/retention. */
export interface PruneReport {
  /** When the run ended (epoch ms). */
  at: number;
  /** The oldest start kept by the window (epoch ms), before any hold by an export. */
  windowFrom: number;
  /** Where removal stopped for a destination still to be sent to; null when none held it. */
  heldFrom: number | null;
  requests: number;
  attempts: number;
  /** Rollup rows removed. */
  rollupRows: number;
  /** Session summaries removed (their last request older than the rows' window). */
  sessionSummaries: number;
  /** Free pages given back to the disk. */
  vacuumedPages: number;
  /** Prune steps run; each one write transaction. */
  steps: number;
}

export interface PrunerStatus {
  last: PruneReport | null;
  /** Requests removed since this process started. */
  removedTotal: number;
  running: boolean;
  lastError: string | null;
}

export const PRUNE_EVERY_MS = 60_000;

/**
 * History retention (docs/scaling.md "Retention"): at start and every minute, removes requests
 * older than the window with their attempts, then session summaries whose last request is, then
 * rollups older than theirs, then gives the freed pages back, each step one small transaction run between the writer's batches. Every step is
 * atomic and removes the oldest first, so a process stopped mid-run loses nothing inside the
 * window and the next run carries on where it stopped.
 */
export class HistoryPruner {
  readonly #db: Db;
  readonly #opts: HistoryPrunerOptions;
  #cancel: (() => void) | null = null;
  #running: Promise<PruneReport | null> | null = null;
  #closed = false;
  #last: PruneReport | null = null;
  #removedTotal = 0;
  #lastError: string | null = null;

  constructor(db: Db, opts: HistoryPrunerOptions) {
    this.#db = db;
    this.#opts = opts;
  }

  /** Runs now, then every `everyMs` after each run ends. */
  start(): void {
    void this.#tick();
  }

  /** One run now, or the one under way; null when it failed (see `status().lastError`). */
  pruneNow(): Promise<PruneReport | null> {
    this.#running ??= this.#run().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  status(): PrunerStatus {
    return {
      last: this.#last,
      removedTotal: this.#removedTotal,
      running: this.#running !== null,
      lastError: this.#lastError,
    };
  }

  /** Stops at the end of the step under way; the next start carries on from there. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#cancel?.();
    this.#cancel = null;
    await this.#running;
  }

  async #tick(): Promise<void> {
    await this.pruneNow();
    if (this.#closed) return;
    this.#cancel = this.#opts.clock.after(this.#opts.everyMs ?? PRUNE_EVERY_MS, () => {
      this.#cancel = null;
      void this.#tick();
    });
  }

  async #run(): Promise<PruneReport | null> {
    try {
      const report = await this.#prune();
      this.#last = report;
      this.#lastError = null;
      return report;
    } catch (err) {
      this.#lastError = err instanceof Error ? err.message : String(err);
      try {
        this.#opts.onError?.(err);
      } catch {
        // The reporter is for logging; its failure has nowhere better to go.
      }
      return null;
    }
  }

  async #prune(): Promise<PruneReport> {
    const { writer, clock } = this.#opts;
    const policy = this.#opts.policy();
    const now = clock.now();
    const windowFrom = now - policy.retentionDays * DAY_MS;
    const hold = this.#opts.holdFrom?.() ?? null;
    const cutoff = hold === null ? windowFrom : Math.min(windowFrom, hold);
    const batch = Math.max(1, this.#opts.batch ?? PRUNE_BATCH);
    const report: PruneReport = {
      at: now,
      windowFrom,
      heldFrom: hold !== null && hold < windowFrom ? hold : null,
      requests: 0,
      attempts: 0,
      rollupRows: 0,
      sessionSummaries: 0,
      vacuumedPages: 0,
      steps: 0,
    };
    for (let removed = batch; removed >= batch && !this.#closed;) {
      const [attempts = 0, requests = 0] = await writer.upkeep(
        pruneRequestsStep(cutoff, { batch }),
      );
      removed = requests;
      report.requests += requests;
      report.attempts += attempts;
      report.steps++;
      this.#removedTotal += requests;
    }
    // Summaries by the rows' window (and hold): a session listed is one whose rows are kept.
    for (let removed = batch; removed >= batch && !this.#closed;) {
      const [summaries = 0] = await writer.upkeep([pruneSummariesStep(cutoff, { batch })]);
      removed = summaries;
      report.sessionSummaries += summaries;
      report.steps++;
    }
    const rollupCutoff = now - policy.rollupRetentionDays * DAY_MS;
    for (const rollup of this.#opts.rollups ?? []) {
      const step = { cutoff: rollupCutoff, minutes: ROLLUP_MINUTES_PER_STEP };
      for (let removed = 1; removed > 0 && !this.#closed;) {
        const [rows = 0] = await writer.upkeep([pruneRollupStep(rollup, step)]);
        removed = rows;
        report.rollupRows += rows;
        report.steps++;
      }
    }
    if (!this.#closed) await writer.upkeep([pruneInstances(windowFrom)]);
    if (this.#opts.vacuum) report.vacuumedPages = await this.#vacuum();
    report.at = clock.now();
    return report;
  }

  /** Gives free pages back in steps, until none is left or a step frees none (another writer). */
  async #vacuum(): Promise<number> {
    const pages = Math.max(1, this.#opts.vacuumPages ?? VACUUM_PAGES);
    let freed = 0;
    for (let free = await freePages(this.#db); free > 0 && !this.#closed;) {
      await this.#opts.writer.upkeep([vacuumStep(pages)]);
      const left = await freePages(this.#db);
      if (left >= free) break;
      freed += free - left;
      free = left;
    }
    return freed;
  }
}
