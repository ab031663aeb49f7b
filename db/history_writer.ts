import type { InStatement } from "@libsql/client";
import { type BatchExecutor, inProcessExecutor } from "./batch_executor.ts";
import type { Db } from "./client.ts";
import { isRowProblem } from "./database_error.ts";
import { type BatchRow, HistoryQueue } from "./history_queue.ts";
import { upsertAttempts, upsertRequests } from "./history_rows.ts";
import type { AttemptRecord, RequestRecord } from "./records.ts";
import { type Clock, REAL_TIME, workMs } from "../gateway/runtime/clock.ts";
import { nextTurn } from "../gateway/runtime/loop_turn.ts";

export interface HistoryWriterOptions {
  /** Delay between the first queued row and its write, batching the rows that follow. */
  flushEveryMs?: number;
  /**
   * Bound on queued rows while the database is away. A real row beyond it pushes out the oldest
   * expendable row, or the oldest row when none is queued; an expendable row is not queued.
   */
  maxPending?: number;
  /**
   * Bound on queued expendable rows (requests refused before any upstream call,
   * docs/security.md "Refused floods"); an expendable row beyond it is not queued. So a flood of
   * refused requests never pushes out a real row (one that reached an upstream, or billed).
   */
  maxExpendable?: number;
  /** Rows per write transaction. */
  batchSize?: number;
  /** Timer hooks a test drives by hand; otherwise the clock's. */
  schedule?: (fn: () => void, ms: number) => number;
  cancel?: (id: number) => void;
  /** Alternative to schedule/cancel in the shape of `Clock.after`; wins when both are given. */
  after?: (ms: number, fn: () => void) => () => void;
  /** Told about every failed write; the writer itself never throws to its callers. */
  onError?: (err: unknown) => void;
  /** Where batches run; default: on this thread through `db`. The caller closes it. */
  executor?: BatchExecutor;
  /** Told each time rows are discarded unwritten (the bound, or `abandon`), for the metric. */
  onDropped?: (rows: number) => void;
  /** Told how long each successful batch took, for measurement (the benchmark). */
  onBatch?: (batch: { ms: number; rows: number }) => void;
  /**
   * How long the background loop keeps a row of a request (or hop) still running before
   * writing it, in `now` milliseconds. Most requests end sooner, so their open and closed
   * versions merge into one write. An explicit `flush` writes them at once. Default 0.
   */
  deferOpenMs?: number;
  /** The clock `deferOpenMs` is measured on, and the loop's timers (unless `after` is given). */
  clock?: Clock;
  /** A bare `now` in place of the clock's (tests that set the time by hand). */
  now?: () => number;
}

export interface HistoryWriterStats {
  /** Rows queued and not yet written. */
  pending: number;
  /** Rows pushed out by `maxPending` before they could be written. */
  dropped: number;
  /** Rows the database accepted (a row updated twice and written twice counts twice). */
  written: number;
  /** Failed write attempts; each one is retried later. */
  failures: number;
  /** Rows the database refused on their own (a constraint, not an outage); never retried. */
  rejected: number;
  lastError: string | null;
  /** When the writes began to fail (`now` ms); null while the last write succeeded. */
  failingSince: number | null;
  /** The `maxPending` bound. */
  capacity: number;
}

/**
 * How a request row is queued: an expendable one (a request that has not reached an upstream)
 * goes first when the queue is full, and is not queued at all when it is full.
 */
export interface WriteOptions {
  expendable?: boolean;
}

const RETRY_CAP_MS = 2_000;
const RETRY_FLOOR_MS = 25;

/**
 * Queues request and attempt rows in memory and writes them in batches off the request path.
 *
 * Rows are keyed (request id; request id + hop), so a later version of a row replaces a queued
 * earlier one and a request opened and closed within one batch is written once, from its final
 * state. Records are kept by reference and read when their batch is built: a caller that
 * changes a record after writing it must write it again (which queues it again) for the change
 * to be stored. When the database is locked or unreachable the rows stay queued and are
 * retried with backoff; only the `maxPending` and `maxExpendable` bounds ever discard them,
 * expendable rows first.
 */
export class HistoryWriter {
  readonly #executor: BatchExecutor;
  readonly #onBatch: (batch: { ms: number; rows: number }) => void;
  readonly #deferOpenMs: number;
  readonly #now: () => number;
  readonly #deadline: (ms: number) => number;
  readonly #flushEveryMs: number;
  readonly #maxPending: number;
  readonly #batchSize: number;
  readonly #after: (ms: number, fn: () => void) => () => void;
  readonly #onError: (err: unknown) => void;
  readonly #onDropped: (rows: number) => void;
  readonly #queue: HistoryQueue;
  #disarmTimer: (() => void) | null = null;
  #draining: Promise<boolean> | null = null;
  /** The upkeep transaction in flight (retention), which a batch of rows waits for. */
  #upkeep: Promise<unknown> | null = null;
  #failStreak = 0;
  #closed = false;
  #dropped = 0;
  #written = 0;
  #failures = 0;
  #rejected = 0;
  #lastError: string | null = null;
  #failingSince: number | null = null;

  constructor(db: Db, opts: HistoryWriterOptions = {}) {
    this.#executor = opts.executor ?? inProcessExecutor(db);
    this.#onBatch = opts.onBatch ?? (() => {});
    this.#deferOpenMs = Math.max(0, opts.deferOpenMs ?? 0);
    const clock = opts.clock ?? REAL_TIME;
    this.#now = opts.now ?? clock.now;
    this.#deadline = opts.now ? (ms) => opts.now!() + ms : clock.deadline;
    this.#flushEveryMs = Math.max(0, opts.flushEveryMs ?? 50);
    this.#maxPending = Math.max(1, opts.maxPending ?? 100_000);
    this.#queue = new HistoryQueue({
      maxRows: this.#maxPending,
      maxExpendable: Math.max(1, opts.maxExpendable ?? 1_000),
      onDropped: (rows) => this.#countDropped(rows),
    });
    this.#batchSize = Math.max(1, opts.batchSize ?? 200);
    this.#after = opts.after ?? timerFrom(opts, clock);
    this.#onError = opts.onError ?? (() => {});
    this.#onDropped = opts.onDropped ?? (() => {});
  }

  /** Queues the request's row as `record` is when its batch is built (the record is kept). */
  writeRequest(record: RequestRecord, opts: WriteOptions = {}): void {
    const dueAt = record.state === "open" ? this.#deadline(this.#deferOpenMs) : 0;
    this.#queue.putRequest(record, { dueAt, expendable: opts.expendable === true });
    this.#armIdle();
  }

  /** Whether a row for this request id is queued and not yet written. */
  holdsRequest(id: string): boolean {
    return this.#queue.holdsRequest(id);
  }

  /** Queues the hop's row as `record` is when its batch is built (the record is kept). */
  writeAttempt(record: AttemptRecord): void {
    const dueAt = record.outcome === null ? this.#deadline(this.#deferOpenMs) : 0;
    this.#queue.putAttempt(record, { dueAt });
    this.#armIdle();
  }

  /**
   * Writes everything queued now, ignoring any retry backoff. Never rejects: resolves true once
   * nothing is left queued, false when the database refused (rows stay queued, the background
   * loop keeps retrying). Tests loop on it to wait until rows land.
   */
  async flush(): Promise<boolean> {
    while (this.#draining !== null) await this.#draining;
    this.#disarm();
    return await this.#drain({ all: true });
  }

  /**
   * Stops the background loop after one last flush, with the same result as `flush`. Rows
   * written afterwards are queued but only a later explicit `flush` writes them.
   */
  async close(): Promise<boolean> {
    this.#closed = true;
    const landed = await this.flush();
    this.#disarm();
    return landed;
  }

  /**
   * Runs upkeep statements (retention, docs/scaling.md "Retention") as one transaction on the
   * writer's executor, between batches of rows: the rows already due go first, and never while a
   * batch is in flight. A batch that comes due meanwhile waits for this one transaction only,
   * which is why upkeep is cut into small steps; and the caller's next step, coming after that
   * batch was started, waits for it in turn. Resolves with the rows each statement changed;
   * rejects as the executor does. One upkeep at a time.
   */
  async upkeep(statements: InStatement[]): Promise<number[]> {
    if (this.#upkeep !== null) throw new Error("history writer: one upkeep at a time");
    // New rows first: a backlog is never written later because upkeep ran.
    while (this.#draining !== null) await this.#draining;
    if (this.#failStreak === 0 && this.#queue.size > 0) await this.#drain({ all: false });
    while (this.#draining !== null) await this.#draining;
    const run = this.#executor.run(statements);
    const settled = run.then(() => {}, () => {});
    this.#upkeep = settled;
    try {
      return (await run) ?? [];
    } finally {
      this.#upkeep = null;
    }
  }

  /**
   * The rows queued and not yet written, newest version of each. While the database is away
   * (or absent) these are the history there is, and the admin page reads them.
   */
  queuedRows(): { requests: RequestRecord[]; attempts: AttemptRecord[] } {
    return this.#queue.snapshot();
  }

  /**
   * Discards every row still queued, counting them as dropped, and answers how many. For
   * shutdown with the database away: those rows are lost, and the operator must hear of it.
   */
  abandon(): number {
    const lost = this.#queue.clear();
    this.#countDropped(lost);
    return lost;
  }

  stats(): HistoryWriterStats {
    return {
      pending: this.#queue.size,
      dropped: this.#dropped,
      written: this.#written,
      failures: this.#failures,
      rejected: this.#rejected,
      lastError: this.#lastError,
      failingSince: this.#failingSince,
      capacity: this.#maxPending,
    };
  }

  /** A row came in: an idle loop (no timer, no batch in flight) arms its timer. */
  #armIdle(): void {
    if (this.#disarmTimer === null && this.#draining === null) this.#arm(this.#flushEveryMs);
  }

  #countDropped(rows: number): void {
    if (rows === 0) return;
    this.#dropped += rows;
    try {
      this.#onDropped(rows);
    } catch (err) {
      this.#report(err);
    }
  }

  #arm(ms: number): void {
    if (this.#closed) return;
    try {
      this.#disarmTimer = this.#after(ms, () => {
        this.#disarmTimer = null;
        void this.#drain({ all: false });
      });
    } catch (err) {
      // A broken timer hook must not reach a request; rows wait for an explicit flush.
      this.#report(err);
    }
  }

  #disarm(): void {
    const disarm = this.#disarmTimer;
    this.#disarmTimer = null;
    disarm?.();
  }

  #drain(opts: { all: boolean }): Promise<boolean> {
    this.#draining ??= this.#drainAll(opts).finally(() => {
      this.#draining = null;
      this.#rearm();
    });
    return this.#draining;
  }

  /** Rows queued while the last batch was in flight still need a timer. */
  #rearm(): void {
    if (this.#disarmTimer !== null || this.#queue.size === 0) return;
    const backoff = Math.min(
      RETRY_CAP_MS,
      Math.max(this.#flushEveryMs, RETRY_FLOOR_MS) * 2 ** this.#failStreak,
    );
    this.#arm(this.#failStreak > 0 ? backoff : this.#flushEveryMs);
  }

  async #drainAll(opts: { all: boolean }): Promise<boolean> {
    // At most one upkeep transaction ahead of a batch (`upkeep`).
    if (this.#upkeep !== null) await this.#upkeep;
    for (;;) {
      const batch = this.#queue.due(this.#batchSize, { dueBy: opts.all ? Infinity : this.#now() });
      if (!batch.length) return true;
      if (!await this.#writeBatch(batch)) return false;
      // A short batch emptied the queue of due rows: the background loop leaves the rows that
      // came in while it was written to the next tick (`#rearm`). Chasing them at once would
      // shrink every batch to what one write's duration gathers, and each batch has a fixed
      // cost on both threads (post, transaction, commit) however few rows it carries.
      if (!opts.all && batch.length < this.#batchSize) return true;
      // Let requests in between batches (they may share this thread with the driver).
      await nextTurn();
    }
  }

  async #writeBatch(batch: BatchRow[]): Promise<boolean> {
    try {
      const statements = statementsFor(batch);
      const started = workMs();
      await this.#executor.run(statements);
      this.#onBatch({ ms: workMs() - started, rows: batch.length });
    } catch (err) {
      if (!isRowProblem(err)) return this.#fail(err);
      return batch.length > 1 ? await this.#writeEach(batch) : this.#reject(batch, err);
    }
    this.#settle(batch);
    return true;
  }

  /** One bad row must not hold back the rest forever: find it by writing rows one at a time. */
  async #writeEach(batch: BatchRow[]): Promise<boolean> {
    for (const entry of batch) {
      if (!await this.#writeBatch([entry])) return false;
    }
    return true;
  }

  #settle(batch: BatchRow[]): void {
    this.#forget(batch);
    this.#written += batch.length;
    this.#failStreak = 0;
    this.#failingSince = null;
  }

  /** The database answered (a row of its own is wrong): it is not failing. */
  #reject(batch: BatchRow[], err: unknown): boolean {
    this.#forget(batch);
    this.#rejected += batch.length;
    this.#failingSince = null;
    this.#noteError(err);
    return true;
  }

  /** Only the versions that were sent: newer ones queued meanwhile stay to be written next. */
  #forget(batch: BatchRow[]): void {
    this.#queue.forget(batch);
  }

  #fail(err: unknown): boolean {
    this.#failures++;
    this.#failStreak++;
    this.#failingSince ??= this.#now();
    this.#noteError(err);
    return false;
  }

  #noteError(err: unknown): void {
    this.#lastError = err instanceof Error ? err.message : String(err);
    this.#report(err);
  }

  #report(err: unknown): void {
    try {
      this.#onError(err);
    } catch {
      // The reporter is for logging; its failure has nowhere better to go.
    }
  }
}

function timerFrom(
  opts: HistoryWriterOptions,
  clock: Clock,
): (ms: number, fn: () => void) => () => void {
  const { schedule, cancel } = opts;
  if (schedule === undefined) return (ms, fn) => clock.after(ms, fn);
  return (ms, fn) => {
    const id = schedule(fn, ms);
    return () => cancel?.(id);
  };
}

function statementsFor(batch: readonly BatchRow[]): InStatement[] {
  const requests: RequestRecord[] = [];
  const attempts: AttemptRecord[] = [];
  for (const item of batch) {
    if (item.kind === "request") requests.push(item.queued.row);
    else attempts.push(item.queued.row);
  }
  const statements = upsertRequests(requests);
  for (const statement of upsertAttempts(attempts)) statements.push(statement);
  return statements;
}
