import type { AttemptRecord, RequestRecord } from "./records.ts";

/**
 * One queued row: the record as its owner keeps it (never a copy), when it is due, and its
 * version, bumped by every write of the row, so a batch forgets only rows that did not change
 * after it was built.
 */
interface QueuedRow<T> {
  row: T;
  dueAt: number;
  version: number;
}

/** A request's queued rows: its own row and its hops', written together. */
class RequestRows {
  request: QueuedRow<RequestRecord> | null = null;
  hops: QueuedRow<AttemptRecord>[] = [];
  /** Its request row is expendable (docs/security.md "Refused floods"). */
  expendable = false;
  constructor(readonly id: string) {}

  get size(): number {
    return (this.request === null ? 0 : 1) + this.hops.length;
  }

  hop(hop: number): QueuedRow<AttemptRecord> | undefined {
    // Indexed, not for-of: until the function is optimized a for-of makes an object per step
    // (docs/performance_log.md "A request plan").
    for (let i = 0; i < this.hops.length; i++) {
      if (this.hops[i]!.row.hop === hop) return this.hops[i];
    }
    return undefined;
  }
}

/** A row taken into a batch, with the version the batch writes. */
export type BatchRow =
  & { readonly owner: RequestRows; readonly version: number }
  & (
    | { readonly kind: "request"; readonly queued: QueuedRow<RequestRecord> }
    | { readonly kind: "attempt"; readonly queued: QueuedRow<AttemptRecord> }
  );

export interface HistoryQueueOptions {
  /** Bound on queued rows (docs/scaling.md). */
  maxRows: number;
  /** Bound on queued expendable rows (docs/security.md "Refused floods"). */
  maxExpendable: number;
  /** Told each time rows are discarded: pushed out by the bound, or expendable and not queued. */
  onDropped: (rows: number) => void;
}

/**
 * The history writer's queue: rows by request, each request's own row and its hops' together,
 * keyed by the request id the records carry, so queuing a row is a lookup on that id and never
 * builds a key or copies a record. Requests are in age order (the one written last is the
 * youngest), which is the order batches take them in and the bound pushes them out in:
 * expendable request rows first, then the oldest rows.
 */
export class HistoryQueue {
  readonly #byId = new Map<string, RequestRows>();
  // Requests whose row is expendable, oldest first.
  readonly #expendable = new Set<RequestRows>();
  #rows = 0;

  constructor(private readonly opts: HistoryQueueOptions) {}

  /** Rows queued. */
  get size(): number {
    return this.#rows;
  }

  holdsRequest(id: string): boolean {
    return (this.#byId.get(id)?.request ?? null) !== null;
  }

  /**
   * Queues a request's row (or its newer version, which replaces the queued one and so always
   * fits). A new expendable row takes no room a real row needs: with the queue or the
   * expendable rows at their bound it is not queued, and counted as dropped.
   */
  putRequest(row: RequestRecord, opts: { dueAt: number; expendable: boolean }): void {
    const owner = this.#byId.get(row.id);
    const queued = owner?.request;
    if (owner === undefined || queued === null || queued === undefined) {
      if (
        opts.expendable &&
        (this.#rows >= this.opts.maxRows || this.#expendable.size >= this.opts.maxExpendable)
      ) {
        return this.opts.onDropped(1);
      }
      const rows = this.#youngest(owner ?? new RequestRows(row.id));
      rows.request = { row, dueAt: opts.dueAt, version: 0 };
      this.#rows++;
      this.#markExpendable(rows, opts.expendable);
      return this.#bound();
    }
    queued.row = row;
    queued.dueAt = opts.dueAt;
    queued.version++;
    this.#markExpendable(this.#youngest(owner), opts.expendable);
  }

  /** Queues a hop's row, or its newer version. Its request is no longer expendable. */
  putAttempt(row: AttemptRecord, opts: { dueAt: number }): void {
    const owner = this.#youngest(this.#byId.get(row.requestId) ?? new RequestRows(row.requestId));
    this.#markExpendable(owner, false);
    const queued = owner.hop(row.hop);
    if (queued) {
      queued.row = row;
      queued.dueAt = opts.dueAt;
      queued.version++;
      return;
    }
    owner.hops.push({ row, dueAt: opts.dueAt, version: 0 });
    this.#rows++;
    this.#bound();
  }

  /** Up to `count` rows due by `dueBy`, oldest request first, each request's rows together. */
  due(count: number, opts: { dueBy: number }): BatchRow[] {
    const batch: BatchRow[] = [];
    for (const owner of this.#byId.values()) {
      if (batch.length >= count) break;
      const request = owner.request;
      if (request !== null && request.dueAt <= opts.dueBy) {
        batch.push({ owner, kind: "request", queued: request, version: request.version });
      }
      // Indexed, like `hop` above: a for-of makes an object per step until optimized.
      for (let i = 0; i < owner.hops.length; i++) {
        const queued = owner.hops[i]!;
        if (queued.dueAt <= opts.dueBy) {
          batch.push({ owner, kind: "attempt", queued, version: queued.version });
        }
      }
    }
    return batch;
  }

  /** Drops the rows a batch wrote, unless they changed after it was built. */
  forget(batch: readonly BatchRow[]): void {
    for (let i = 0; i < batch.length; i++) {
      const item = batch[i]!;
      if (item.queued.version !== item.version) continue;
      const { owner } = item;
      if (this.#byId.get(owner.id) !== owner) continue;
      if (item.kind === "request") {
        if (owner.request === item.queued) this.#dropRequest(owner);
      } else {
        const at = owner.hops.indexOf(item.queued);
        if (at >= 0) this.#dropHop(owner, at);
      }
    }
  }

  /** Copies of the rows queued, newest version of each. */
  snapshot(): { requests: RequestRecord[]; attempts: AttemptRecord[] } {
    const requests: RequestRecord[] = [];
    const attempts: AttemptRecord[] = [];
    for (const owner of this.#byId.values()) {
      if (owner.request) requests.push({ ...owner.request.row });
      for (const queued of owner.hops) attempts.push({ ...queued.row });
    }
    return { requests, attempts };
  }

  /** Discards every row; answers how many there were. */
  clear(): number {
    const rows = this.#rows;
    this.#byId.clear();
    this.#expendable.clear();
    this.#rows = 0;
    return rows;
  }

  /** The request's rows, made the youngest (a new one is added). */
  #youngest(owner: RequestRows): RequestRows {
    this.#byId.delete(owner.id);
    this.#byId.set(owner.id, owner);
    return owner;
  }

  #markExpendable(owner: RequestRows, expendable: boolean): void {
    if (owner.expendable) this.#expendable.delete(owner);
    owner.expendable = expendable && owner.request !== null;
    if (owner.expendable) this.#expendable.add(owner);
  }

  /** Beyond the bound: the oldest expendable row if any is queued, else the oldest row. */
  #bound(): void {
    while (this.#rows > this.opts.maxRows) {
      const expendable = this.#expendable.values().next();
      const owner = expendable.done ? this.#byId.values().next().value : expendable.value;
      if (owner === undefined) return;
      if (owner.request !== null) this.#dropRequest(owner);
      else this.#dropHop(owner, 0);
      this.opts.onDropped(1);
    }
  }

  #dropRequest(owner: RequestRows): void {
    owner.request = null;
    this.#rows--;
    this.#markExpendable(owner, false);
    if (owner.size === 0) this.#byId.delete(owner.id);
  }

  #dropHop(owner: RequestRows, at: number): void {
    owner.hops.splice(at, 1);
    this.#rows--;
    if (owner.size === 0) this.#byId.delete(owner.id);
  }
}
