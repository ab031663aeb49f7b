import type { InArgs, InStatement } from "@libsql/client";
import { type Db, DEFAULT_BUSY_TIMEOUT_MS, localFilePath, writing } from "./client.ts";
import { historyWorkerMain } from "./history_worker.ts";
import { WORKER_START_BOUND_MS } from "./worker_start.ts";
import { REAL_TIME } from "../gateway/runtime/clock.ts";

/**
 * Runs one write transaction of statements; how and where is the executor's business. Resolves
 * with the rows each statement changed (retention counts what it removed by them); an executor
 * that does not count (a test's) resolves with nothing.
 */
export interface BatchExecutor {
  run(statements: InStatement[]): Promise<number[] | void>;
  close(): Promise<void>;
}

/**
 * On this thread, through the given connection (remote databases: the wait is network I/O). For
 * a local file (where no worker could start) each batch first sets `synchronous=NORMAL` on the
 * connection it is about to use, as the worker does on its own (docs/scaling.md "Durability of
 * a local file"): the pool lends its most recently returned connection, so both calls get the
 * same one.
 */
export function inProcessExecutor(db: Db): BatchExecutor {
  const local = db.client.protocol === "file";
  return {
    run: async (statements) =>
      await writing(db, async (client) => {
        if (local) await client.execute("PRAGMA synchronous=NORMAL");
        // A pragma that works in steps (incremental_vacuum) is left half-run by the batch's one
        // step per statement, and its COMMIT then fails: executeMultiple runs it to its end.
        if (statements.length > 0 && statements.every(isPragma)) {
          await client.executeMultiple(statements.join(";\n"));
          return statements.map(() => 0);
        }
        const results = await client.batch(statements, "write");
        return results.map((result) => result.rowsAffected);
      }),
    close: () => Promise.resolve(),
  };
}

function isPragma(statement: InStatement): statement is string {
  return typeof statement === "string" && statement.startsWith("PRAGMA ");
}

interface Reply {
  id: number;
  /** Rows each statement of a batch changed. */
  changes?: number[];
  error?: { message: string; code?: string };
  /** Something the worker could not do that costs no write (its thread's priority). */
  warning?: string;
}

/** An error from the worker, with the SQLite code the writer classifies by. */
class WorkerWriteError extends Error {
  constructor(message: string, readonly code: string | undefined) {
    super(message);
  }
}

/**
 * On a worker thread with its own connection to the local file `url` names
 * (db/history_worker.ts). The local libSQL driver runs a batch synchronously, so on the serving
 * thread every batch would stall requests for its whole duration. Where a worker cannot start
 * (a runtime without workers, or without the package in reach), `fallback` writes instead, so
 * history is slower but never lost. Batches run one after another in the order `run` was
 * called.
 */
export function workerExecutor(
  url: string,
  opts: {
    fallback?: BatchExecutor;
    onFallback?: (err: unknown) => void;
    /** How long the worker may take to open the database, or to close (WORKER_START_BOUND_MS). */
    startBoundMs?: number;
    /** The start bound's timer; default the unscaled clock. */
    after?: (ms: number, fn: () => void) => () => void;
    /** Makes the thread; default one running db/history_worker.ts (tests hand a stand-in). */
    worker?: () => Worker;
    /**
     * The worker thread's nice value (docs/scaling.md "The database threads' priority"); 0 leaves
     * it at the serving thread's.
     */
    nice?: number;
    /** Told what the worker could not do without failing (its priority refused). */
    onWarning?: (warning: string) => void;
  } = {},
): BatchExecutor {
  const boundMs = opts.startBoundMs ?? WORKER_START_BOUND_MS;
  const after = opts.after ?? REAL_TIME.after;
  const worker = (opts.worker ?? historyWorker)();
  const waiting = new Map<
    number,
    { resolve: (changes: number[]) => void; reject: (err: Error) => void }
  >();
  let next = 0;
  /** Why the worker takes no more batches (it failed, or never answered its start). */
  let gone: Error | null = null;
  /** Whether it opened the database: a failure after that is told as a fallback. */
  let up = false;
  // Every batch waiting on it is refused at once, and later ones go to the fallback (or are
  // refused): none waits for an answer that cannot come.
  const fail = (err: Error) => {
    if (gone) return;
    gone = err;
    for (const pending of waiting.values()) pending.reject(err);
    waiting.clear();
    worker.terminate();
    if (up && opts.fallback) opts.onFallback?.(err);
  };
  worker.onmessage = (event: MessageEvent<Reply>) => {
    const { id, error, changes, warning } = event.data;
    if (warning !== undefined) opts.onWarning?.(warning);
    const pending = waiting.get(id);
    waiting.delete(id);
    if (error) pending?.reject(new WorkerWriteError(error.message, error.code));
    else pending?.resolve(changes ?? []);
  };
  worker.onerror = (event) => {
    event.preventDefault();
    fail(new Error(`the history worker failed: ${event.message}`));
  };
  const texts = sqlTexts();
  const call = (message: Record<string, unknown>) =>
    new Promise<number[]>((resolve, reject) => {
      if (gone) return reject(gone);
      const id = next++;
      waiting.set(id, { resolve, reject });
      worker.postMessage({ id, ...message });
    });
  /** `call`, given up on past the bound: the worker is then gone. */
  const bounded = (message: Record<string, unknown>, what: string) => {
    const cancel = after(
      boundMs,
      () => fail(new Error(`the history worker did not ${what} within ${boundMs} ms`)),
    );
    return call(message).finally(cancel);
  };
  const path = localFilePath(url);
  const opened = path === null
    ? Promise.reject(new Error(`the history worker writes local files only, not ${url}`))
    : bounded(
      { open: { path, timeoutMs: DEFAULT_BUSY_TIMEOUT_MS, nice: opts.nice ?? 0 } },
      "open the database",
    );
  const started = opened.then(() => (up = true), (err) => {
    if (!opts.fallback) return false;
    opts.onFallback?.(err);
    worker.terminate();
    return false;
  });
  return {
    run: async (statements) => {
      if (!(await started) || gone) {
        if (opts.fallback) return await opts.fallback.run(statements);
        await opened; // rethrows why the worker could not start
      }
      return await call({ statements: statements.map(texts.compact) });
    },
    close: async () => {
      if (await started) await bounded({ close: true }, "close").catch(() => []);
      worker.terminate();
      await opts.fallback?.close();
    },
  };
}

/** A thread running db/history_worker.ts. */
function historyWorker(): Worker {
  // Plain JS, already checked as db/history_worker.ts. A type-checking `deno test` would still
  // check this data: module at every start (seconds of CPU each), which is why `task test`
  // checks the tree once and runs the suites with --no-check.
  const source = `// @ts-nocheck\n(${historyWorkerMain.toString()})()`;
  return new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
}

/** A statement as posted to the worker: its text, or the number of a text sent before. */
interface PostedStatement {
  sql?: string;
  ref?: number;
  args?: InArgs;
}

// Texts the worker keeps, each with its prepared statement; the history writer reuses a dozen
// (one per table and power-of-two row count), others are sent whole each time once this many are
// known.
const MAX_KEPT_TEXTS = 256;

/**
 * Sends each statement text to the worker once. Structured clone copies every string it posts,
 * and an upsert of many rows is kilobytes of SQL: the serving thread would copy it per batch.
 */
function sqlTexts(): { compact: (statement: InStatement) => PostedStatement } {
  const known = new Map<string, number>();
  return {
    compact: (statement) => {
      const { sql, args }: { sql: string; args?: InArgs } = typeof statement === "string"
        ? { sql: statement }
        : statement;
      const ref = known.get(sql);
      if (ref !== undefined) return { ref, args };
      if (known.size >= MAX_KEPT_TEXTS) return { sql, args };
      known.set(sql, known.size);
      return { sql, ref: known.size - 1, args };
    },
  };
}
