import type { BatchExecutor } from "../../db/batch_executor.ts";
import type { Db } from "../../db/client.ts";
import {
  addKeyUsage,
  addKeyUsageStatements,
  type KeyUsageIncrement,
  type KeyUsageRow,
  pruneKeySeconds,
  pruneKeySecondsStatement,
  readKeyUsage,
} from "../../db/key_usage_store.ts";
import { type Clock, REAL_TIME } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { isRowProblem } from "../../db/database_error.ts";
import { billableAmount } from "../live/billing.ts";
import { dayStart, monthStart, WINDOW_MS } from "./usage_windows.ts";

/** How long a read of the shared counters serves this process (clock ms). */
const CACHE_MS = 1_000;
/** A database slower than this does not hold a request: the last read (or none) is used. */
const READ_TIMEOUT_MS = 500;
/** Local increments kept while the database cannot take them, newest last. */
const MAX_UNWRITTEN = 10_000;
const PRUNE_EVERY_MS = 60_000;
/** Writes of one increment the database refused on its own before it is set aside. */
const ROW_TRIES = 3;
/** Set-aside increments kept for this process's own count, newest last. */
const MAX_SET_ASIDE = 1_000;

interface Increment {
  keyId: string;
  at: number;
  requests: number;
  tokens: number;
  costUsd: number;
  /** When its write committed; null until then. */
  doneAt: number | null;
  /** Writes of it alone the database refused (a constraint, not an outage). */
  refusals: number;
}

interface Snapshot {
  /** When the last read of the key's rows began, successful or not: the cache runs from it. */
  readStartedAt: number;
  /** Every increment of this process's written before this is counted in `rows`. */
  coveredUntil: number;
  rows: KeyUsageRow[];
}

/**
 * A process's view of the per-key usage counters shared in libSQL (docs/scaling.md "Key
 * limits"): the last read of the key's rows, plus this process's own increments that read
 * may not include yet. Increments are written in the background, batched; reads are cached
 * for about a second, so another instance's use shows here within that.
 *
 * When reads fail (or time out) while writes succeed, this process's own written increments
 * are folded into the key's snapshot rather than forgotten: limits then hold on this
 * process's own count, which can only under-count what other instances admit
 * (docs/security.md "Key limits when the database cannot be read").
 *
 * `writes`, when given, runs the writes: the history writer's executor, so for a local file they
 * go to its worker thread, whose connection may wait up to its busy timeout for a locked
 * database without holding the serving thread (docs/scaling.md "Shared through libSQL, and how
 * late each process sees it"). Without it they run through `db`.
 */
export class KeyUsageMeter {
  #increments: Increment[] = [];
  #snapshots = new Map<string, Snapshot>();
  #reads = new Map<string, Promise<void>>();
  #flushing: Promise<void> | null = null;
  #flushQueued = false;
  #lastPrune = 0;
  #readsFailing = false;
  /** Increments the database refused however often they were sent: counted here, never written. */
  #setAside: Increment[] = [];

  constructor(
    private deps: {
      db: Db;
      clock: Clock;
      log?: Logger;
      writes?: BatchExecutor;
      metrics?: Metrics;
    },
  ) {}

  /**
   * Counts use for a key: written to the database soon, seen by this process at once. Amounts
   * that are not finite and 0 or more count as 0: a budget must never be credited nor stuck at
   * NaN (docs/security.md "Numbers an upstream reports").
   */
  add(keyId: string, use: { requests?: number; tokens?: number; costUsd?: number }): void {
    this.#increments.push({
      keyId,
      at: this.deps.clock.now(),
      requests: billableAmount(use.requests),
      tokens: billableAmount(use.tokens),
      costUsd: billableAmount(use.costUsd),
      doneAt: null,
      refusals: 0,
    });
    if (this.#increments.length > MAX_UNWRITTEN) this.#increments.shift();
    this.#scheduleFlush();
  }

  /** Re-reads the key's shared rows when the last read is older than the cache time. */
  async refresh(keyIds: readonly string[]): Promise<void> {
    const now = this.deps.clock.now();
    const stale = keyIds.filter((id) => {
      const snap = this.#snapshots.get(id);
      return !snap || this.deps.clock.elapsed(snap.readStartedAt, now) >= CACHE_MS ||
        dayStart(snap.readStartedAt) !== dayStart(now);
    });
    await Promise.all(stale.map((id) => this.#read(id)));
  }

  /** The key's rows as this process knows them: the last read plus what it may not include. */
  rows(keyId: string): KeyUsageRow[] {
    const snap = this.#snapshots.get(keyId);
    const rows = [...(snap?.rows ?? [])];
    for (const inc of this.#setAside) if (inc.keyId === keyId) rows.push(...keyRows(inc));
    for (const inc of this.#increments) {
      if (inc.keyId !== keyId) continue;
      if (snap && inc.doneAt !== null && inc.doneAt < snap.coveredUntil) continue;
      rows.push(...keyRows(inc));
    }
    return rows;
  }

  /** Waits for increments made so far to be written (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.#flushing || this.#increments.some((i) => i.doneAt === null)) {
      if (!this.#flushing) this.#flushing = this.#write();
      await this.#flushing;
      if (this.#increments.some((i) => i.doneAt === null) && !this.#flushing) break;
    }
  }

  #read(keyId: string): Promise<void> {
    let reading = this.#reads.get(keyId);
    if (reading) return reading;
    const readStartedAt = this.deps.clock.now();
    const read = readKeyUsage(this.deps.db, { keyIds: [keyId], ...readSpan(readStartedAt) })
      .then((found) => {
        if (this.#readsFailing) {
          this.#readsFailing = false;
          this.deps.log?.event("key_usage.reads_back", {});
        }
        // A read that outlived its timeout must not replace a newer one, nor one holding own
        // increments it may not include.
        if ((this.#snapshots.get(keyId)?.coveredUntil ?? -1) >= readStartedAt) return;
        const rows = found.get(keyId) ?? [];
        this.#snapshots.set(keyId, { readStartedAt, coveredUntil: readStartedAt, rows });
        this.#forgetCovered();
      }, (err) => this.#readFailed(keyId, { readStartedAt, err }));
    let cancel = () => {};
    // A bound on the database's real answer time: a scaled clock must not shorten it.
    const timeout = new Promise<void>((resolve) => {
      cancel = REAL_TIME.after(READ_TIMEOUT_MS, resolve);
    });
    reading = Promise.race([read, timeout]).finally(() => {
      cancel();
      this.#reads.delete(keyId);
    });
    this.#reads.set(keyId, reading);
    return reading;
  }

  /**
   * The read failed: the key's written increments go into its snapshot (so they keep counting
   * though no read includes them), and the failed read starts the cache like a good one, so a
   * database that fails is asked once a second per key, not once per request. Logged once per
   * run of failures.
   */
  #readFailed(keyId: string, opts: { readStartedAt: number; err: unknown }): void {
    if (!this.#readsFailing) {
      this.#readsFailing = true;
      this.deps.log?.event("key_usage.read_failed", { error: String(opts.err) });
    }
    this.#fold(keyId);
    const snap = this.#snapshots.get(keyId);
    if (snap) snap.readStartedAt = Math.max(snap.readStartedAt, opts.readStartedAt);
  }

  /**
   * A written increment is counted in a key's snapshot once it is covered: by a read that began
   * after it was written (which drops it from the list), or by folding it in. While a read that
   * may miss it is in flight it stays in the list. So the list stays as short as the writes in
   * flight, whether reads succeed or not.
   */
  #forgetCovered(): void {
    const uncovered = new Set<string>();
    this.#increments = this.#increments.filter((inc) => {
      if (inc.doneAt === null || this.#reads.has(inc.keyId)) return true;
      const snap = this.#snapshots.get(inc.keyId);
      if (snap !== undefined && inc.doneAt < snap.coveredUntil) return false;
      uncovered.add(inc.keyId);
      return true;
    });
    for (const keyId of uncovered) this.#fold(keyId);
  }

  /**
   * Moves the key's written increments that its snapshot does not cover into the snapshot's
   * rows. A later read that begins after this includes them and replaces the snapshot; one that
   * began before is ignored (`coveredUntil`). Rows past the read's span are dropped, so a
   * snapshot holds at most about 62 second rows and 31 day rows.
   */
  #fold(keyId: string): void {
    const now = this.deps.clock.now();
    const snap = this.#snapshots.get(keyId) ??
      { readStartedAt: -Infinity, coveredUntil: -Infinity, rows: [] };
    const rows = new Map(snap.rows.map((r) => [`${r.kind}:${r.start}`, { ...r }]));
    this.#increments = this.#increments.filter((inc) => {
      if (inc.keyId !== keyId || inc.doneAt === null) return true;
      if (inc.doneAt >= snap.coveredUntil) {
        for (const row of keyRows(inc)) {
          const known = rows.get(`${row.kind}:${row.start}`);
          if (!known) rows.set(`${row.kind}:${row.start}`, row);
          else {
            known.requests += row.requests;
            known.tokens += row.tokens;
            known.costUsd += row.costUsd;
          }
        }
      }
      return false;
    });
    const span = readSpan(now);
    this.#snapshots.set(keyId, {
      readStartedAt: snap.readStartedAt,
      coveredUntil: now,
      rows: [...rows.values()].filter((r) =>
        r.kind === "second" ? r.start > span.secondsAfter : r.start >= span.daysFrom
      ),
    });
  }

  #scheduleFlush(): void {
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    // One write per burst: every increment made in this turn of the event loop goes together.
    queueMicrotask(() => {
      this.#flushQueued = false;
      if (!this.#flushing) this.#flushing = this.#write();
    });
  }

  async #write(): Promise<void> {
    const batch = this.#increments.filter((i) => i.doneAt === null);
    try {
      if (batch.length) {
        // One the database refused before goes alone: it must not fail the others' batch again.
        await this.#writeIncrements(batch.filter((i) => i.refusals === 0));
        for (const inc of batch) if (inc.refusals > 0) await this.#writeIncrements([inc]);
        this.#forgetCovered();
      }
      await this.#prune();
    } catch (err) {
      this.deps.log?.event("key_usage.write_failed", { error: String(err) });
    } finally {
      this.#flushing = null;
    }
    // Increments that came during the write go in the next one.
    if (this.#increments.some((i) => i.doneAt === null && !batch.includes(i))) {
      this.#scheduleFlush();
    }
  }

  /**
   * Writes increments in one transaction. When the database refuses a row of its own (a
   * constraint, not an outage) they go one at a time, so the bad one never holds back the other
   * keys' behind it; it is tried again with the next writes, then set aside.
   */
  async #writeIncrements(batch: Increment[]): Promise<void> {
    if (!batch.length) return;
    try {
      const rows = batch.flatMap(incrementRows);
      if (this.deps.writes) await this.deps.writes.run(addKeyUsageStatements(rows));
      else await addKeyUsage(this.deps.db, rows);
    } catch (err) {
      if (!isRowProblem(err)) throw err;
      if (batch.length === 1) return this.#refused(batch[0]!, err);
      for (const inc of batch) await this.#writeIncrements([inc]);
      return;
    }
    const doneAt = this.deps.clock.now();
    for (const inc of batch) inc.doneAt = doneAt;
  }

  /**
   * The database refused this increment alone. After ROW_TRIES it leaves the write queue with a
   * log line and a metric; this process keeps counting it for the key's limits, so what was
   * billed is not forgotten here, though other instances never see it.
   */
  #refused(inc: Increment, err: unknown): void {
    inc.refusals++;
    if (inc.refusals < ROW_TRIES) return;
    this.#increments = this.#increments.filter((i) => i !== inc);
    this.#setAside.push(inc);
    if (this.#setAside.length > MAX_SET_ASIDE) this.#setAside.shift();
    this.deps.metrics?.keyUsageSetAside.inc();
    this.deps.log?.event("key_usage.row_set_aside", {
      key: inc.keyId,
      at: inc.at,
      requests: inc.requests,
      tokens: inc.tokens,
      cost_usd: inc.costUsd,
      error: String(err),
    });
  }

  async #prune(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.#lastPrune < PRUNE_EVERY_MS) return;
    this.#lastPrune = now;
    const before = now - 2 * WINDOW_MS;
    if (this.deps.writes) await this.deps.writes.run([pruneKeySecondsStatement(before)]);
    else await pruneKeySeconds(this.deps.db, before);
  }
}

/** The rows a read at `at` returns: the sliding minute's seconds, and the month's days. */
function readSpan(at: number): { secondsAfter: number; daysFrom: number } {
  return {
    secondsAfter: at - WINDOW_MS - 1_000,
    daysFrom: Math.min(monthStart(at), dayStart(at)),
  };
}

/** An increment's rows as its key's own (without the key id). */
function keyRows(inc: Increment): KeyUsageRow[] {
  return incrementRows(inc).map(({ keyId: _, ...row }) => row);
}

function incrementRows(inc: Increment): KeyUsageIncrement[] {
  const use = { requests: inc.requests, tokens: inc.tokens, costUsd: inc.costUsd };
  return [
    { keyId: inc.keyId, kind: "second", start: Math.floor(inc.at / 1_000) * 1_000, ...use },
    { keyId: inc.keyId, kind: "day", start: dayStart(inc.at), ...use },
  ];
}
