import type { InArgs, InStatement } from "@libsql/client";
import { REAL_TIME } from "../gateway/runtime/clock.ts";
import { DEFAULT_BUSY_TIMEOUT_MS, localFilePath } from "./client.ts";
import {
  QueryTooLargeError,
  type ReadDb,
  ReaderClosedError,
  type ReadResult,
  type ReadRow,
} from "./read_db.ts";
import { readWorkerMain } from "./read_worker.ts";
import { WORKER_START_BOUND_MS } from "./worker_start.ts";

/**
 * How long one admin read may run before it is stopped (docs/scaling.md "Admin reads"): long
 * enough for a month of costs at a million rows a day on a slow disk, short enough that a
 * query that would read far more is refused while the operator still waits for it.
 * `PULSEGATE_ADMIN_QUERY_TIMEOUT_MS` sets it.
 */
export const ADMIN_QUERY_BOUND_MS = 5_000;

/**
 * Reads run at once, each on its own connection: one slow report (stopped at its bound) never
 * holds the others, and two keep the reader to one core of a small machine beside the server.
 */
export const READER_CONNECTIONS = 2;

/**
 * Reads waiting beyond those running; one more is refused at once (`ReadersBusyError`). A page
 * load asks for about ten, each at most the bound.
 */
export const MAX_WAITING_READS = 256;

/**
 * How long past its bound the serving thread waits for a read's answer before it replaces the
 * worker: the worker interrupts a query itself, so only one stuck between two rows (a step the
 * interrupt cannot reach) is left to this.
 */
const WATCHDOG_GRACE_MS = 1_000;

/** Too many admin reads wait already; the read was not run. */
export class ReadersBusyError extends Error {
  constructor() {
    super(`${MAX_WAITING_READS} admin reads are already waiting for the database; try again`);
    this.name = "ReadersBusyError";
  }
}

/** An error SQLite reported in the worker, named as the client names its own (database_error.ts). */
class ReaderDatabaseError extends Error {
  constructor(message: string, readonly code: string | undefined) {
    super(message);
    this.name = code?.startsWith("SQLITE_") ? "LibsqlError" : "ReaderError";
  }
}

export interface WorkerReads extends ReadDb {
  /** Stops the worker; reads still waiting are refused with `ReaderClosedError`. */
  close(): Promise<void>;
}

export interface WorkerReadsOptions {
  /** Each read's bound in real ms; default ADMIN_QUERY_BOUND_MS. */
  boundMs?: number;
  /** Reads at once; default READER_CONNECTIONS. */
  connections?: number;
  /**
   * Reads through here when no worker can start (a runtime without workers, or without the
   * package in reach): slower for the serving thread, never absent.
   */
  fallback?: ReadDb;
  onFallback?: (err: unknown) => void;
  /** Told when a read outlived its bound and grace and the worker was replaced. */
  onReplaced?: () => void;
  /** The watchdog's timer; default the unscaled clock (the bound is SQLite's real run time). */
  after?: (ms: number, fn: () => void) => () => void;
  /** How long the worker may take to open the database; default WORKER_START_BOUND_MS. */
  startBoundMs?: number;
  /** Makes the reader's thread; default one running db/read_worker.ts (tests hand a stand-in). */
  worker?: () => Worker;
  /**
   * The reader thread's nice value (docs/scaling.md "The database threads' priority"); 0 leaves
   * it at the serving thread's.
   */
  nice?: number;
  /** Told what the worker could not do without failing (its priority refused). */
  onWarning?: (warning: string) => void;
}

interface Job {
  statements: PostedStatement[];
  resolve: (results: ReadResult[]) => void;
  reject: (err: Error) => void;
}

interface PostedStatement {
  sql: string;
  args?: InArgs;
}

interface Reply {
  id: number;
  results?: ReadRow[][];
  error?: { message: string; code?: string; stopped?: boolean };
  /** Something the worker could not do that costs no read (its thread's priority). */
  warning?: string;
}

/** A message the worker has not answered yet. */
interface Running {
  settle: (reply: Reply) => void;
  /** Refused without an answer (the reader is closing). */
  fail: (err: Error) => void;
  /** Sent again to the next worker (this one was replaced while it ran). */
  requeue: () => void;
}

/** One worker and the reads it is running, by message id. */
interface Thread {
  worker: Worker;
  /** Why it could not start, or null once it has opened the database. */
  started: Promise<string | null>;
  running: Map<number, Running>;
}

/**
 * Admin reads of the local file `url` on a worker thread of their own (db/read_worker.ts), at
 * most `connections` at once and the rest queued in order, each stopped at its bound: the query
 * is interrupted in SQLite and the read rejects with `QueryTooLargeError`. The worker starts on
 * the first read, so a gateway nobody opens the page of never pays for it.
 */
export function workerReads(url: string, opts: WorkerReadsOptions = {}): WorkerReads {
  const boundMs = opts.boundMs ?? ADMIN_QUERY_BOUND_MS;
  const connections = Math.max(1, opts.connections ?? READER_CONNECTIONS);
  const after = opts.after ?? REAL_TIME.after;
  const startBoundMs = opts.startBoundMs ?? WORKER_START_BOUND_MS;
  const path = localFilePath(url);
  const waiting: Job[] = [];
  let running = 0;
  let thread: Thread | null = null;
  let fallingBack = false;
  let closed = false;
  let next = 0;

  const drop = (dead: Thread) => {
    dead.worker.terminate();
    if (thread === dead) thread = null;
  };
  const spawn = (): Thread => {
    const worker = (opts.worker ?? readerWorker)();
    const running: Thread["running"] = new Map();
    const id = next;
    const opening = new Promise<string | null>((resolve) => {
      // A worker that never answers its first message (one that lost it, or died before it
      // could say) would hold every read behind it: past the bound it counts as not started.
      const cancel = after(startBoundMs, () => {
        if (running.delete(id)) resolve(`it did not answer within ${startBoundMs} ms`);
      });
      const end = (why: string | null) => (cancel(), resolve(why));
      running.set(id, {
        settle: (reply) => end(reply.error ? reply.error.message : null),
        fail: (err) => end(err.message),
        requeue: () => end("it was replaced"),
      });
    });
    const spawned: Thread = { worker, started: opening, running };
    worker.onmessage = (event: MessageEvent<Reply>) => {
      if (event.data.warning !== undefined) opts.onWarning?.(event.data.warning);
      const entry = running.get(event.data.id);
      running.delete(event.data.id);
      entry?.settle(event.data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      const failure = { id: -1, error: { message: event.message } };
      for (const entry of running.values()) entry.settle(failure);
      running.clear();
      drop(spawned);
    };
    next++;
    if (path === null) {
      running.get(id)?.settle({ id, error: { message: `not a local file: ${url}` } });
      running.delete(id);
    } else {
      const open = { path, timeoutMs: DEFAULT_BUSY_TIMEOUT_MS, boundMs, nice: opts.nice ?? 0 };
      worker.postMessage({ id, open });
    }
    return spawned;
  };
  const current = async (): Promise<Thread | null> => {
    if (fallingBack) return null;
    thread ??= spawn();
    const mine = thread;
    const why = await mine.started;
    if (why === null) return mine;
    const err = new Error(`the admin reader could not open the database: ${why}`);
    if (opts.fallback && !fallingBack) {
      fallingBack = true;
      opts.onFallback?.(err);
    }
    drop(mine);
    if (fallingBack) return null;
    throw err;
  };
  const onFallback = async (job: Job) => {
    if (!opts.fallback) throw new Error("no admin reader");
    const results: ReadResult[] = [];
    for (const statement of job.statements) results.push(await opts.fallback.execute(statement));
    return results;
  };
  const runJob = async (job: Job): Promise<void> => {
    // Closed while it waited: no worker is started again for it.
    if (closed) return job.reject(new ReaderClosedError());
    const mine = await current().catch((err) => {
      job.reject(err instanceof Error ? err : new Error(String(err)));
      return undefined;
    });
    if (mine === undefined) return;
    if (closed) return job.reject(new ReaderClosedError());
    if (mine === null) {
      await onFallback(job).then(job.resolve, job.reject);
      return;
    }
    await new Promise<void>((done) => {
      const id = next++;
      const cancel = after(boundMs + WATCHDOG_GRACE_MS, () => {
        // Stuck where the interrupt cannot reach it: the whole worker goes, and the reads it
        // was running besides this one start again on the next.
        if (!mine.running.has(id)) return;
        mine.running.delete(id);
        for (const entry of mine.running.values()) entry.requeue();
        mine.running.clear();
        drop(mine);
        opts.onReplaced?.();
        job.reject(new QueryTooLargeError(boundMs));
        done();
      });
      mine.running.set(id, {
        fail: (err) => {
          cancel();
          job.reject(err);
          done();
        },
        settle: (reply) => {
          cancel();
          if (reply.results) job.resolve(reply.results.map((rows) => ({ rows })));
          else if (reply.error?.stopped) job.reject(new QueryTooLargeError(boundMs));
          else {
            const { message, code } = reply.error ?? { message: "admin reader failed" };
            job.reject(new ReaderDatabaseError(message, code));
          }
          done();
        },
        requeue: () => {
          cancel();
          waiting.unshift(job);
          done();
        },
      });
      mine.worker.postMessage({ id, statements: job.statements });
    });
  };
  const pump = () => {
    while (running < connections && waiting.length > 0) {
      const job = waiting.shift()!;
      running++;
      void runJob(job).finally(() => {
        running--;
        pump();
      });
    }
  };
  const read = (statements: PostedStatement[]) =>
    new Promise<ReadResult[]>((resolve, reject) => {
      if (closed) return reject(new ReaderClosedError());
      if (waiting.length >= MAX_WAITING_READS) return reject(new ReadersBusyError());
      waiting.push({ statements, resolve, reject });
      pump();
    });
  return {
    execute: async (statement) => {
      const [result] = await read([posted(statement)]);
      return result ?? { rows: [] };
    },
    close: async () => {
      closed = true;
      for (const job of waiting.splice(0)) job.reject(new ReaderClosedError());
      const last = thread;
      if (last === null) return;
      thread = null;
      for (const entry of last.running.values()) entry.fail(new ReaderClosedError());
      last.running.clear();
      // Its connections closed before it goes, unless it cannot answer within the grace.
      if ((await last.started) === null) {
        await new Promise<void>((resolve) => {
          const cancel = after(WATCHDOG_GRACE_MS, resolve);
          const id = next++;
          last.running.set(id, {
            settle: () => (cancel(), resolve()),
            fail: () => (cancel(), resolve()),
            requeue: () => (cancel(), resolve()),
          });
          last.worker.postMessage({ id, close: true });
        });
      }
      last.worker.terminate();
    },
  };
}

/** A thread running db/read_worker.ts. */
function readerWorker(): Worker {
  // Plain JS, already checked as db/read_worker.ts (see workerExecutor in batch_executor.ts).
  const source = `// @ts-nocheck\n(${readWorkerMain.toString()})()`;
  return new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
}

function posted(statement: InStatement): PostedStatement {
  if (typeof statement === "string") return { sql: statement };
  return { sql: statement.sql, args: statement.args };
}
