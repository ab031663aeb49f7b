import assert from "node:assert/strict";
import { ownNice, threadNices } from "./thread_nices.ts";
import { QueryTooLargeError, ReaderClosedError } from "../db/read_db.ts";
import { readWorkerMain } from "../db/read_worker.ts";
import { workerReads } from "../db/worker_reads.ts";
import { withTempDb } from "./db_helpers.ts";

// docs/scaling.md "Admin reads": the reader thread stops a query at its bound, for real.

/** Counts to a billion: minutes of one core, all of it before its one row. */
const ENDLESS = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1e9)
  SELECT count(*) AS n FROM c`;

/** CPU time this process has used (user + system), in ms, from /proc. */
function processCpuMs(): number {
  const fields = Deno.readTextFileSync("/proc/self/stat").split(") ")[1]!.split(" ");
  // utime and stime are fields 14 and 15 of the line, 12 and 13 after "pid (comm) ".
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

Deno.test("a read past its bound is interrupted in SQLite, and the reader goes on", async () => {
  await withTempDb(async ({ url }) => {
    const reads = workerReads(url, { boundMs: 300 });
    try {
      assert.deepEqual((await reads.execute("SELECT 1 AS one")).rows, [{ one: 1 }]);
      const started = performance.now();
      await assert.rejects(reads.execute(ENDLESS), (err) => {
        assert.ok(err instanceof QueryTooLargeError);
        assert.equal(err.boundMs, 300);
        return true;
      });
      // Answered at the bound, not when the count would end (minutes); generous for a loaded
      // machine, far below what the query needs.
      assert.ok(performance.now() - started < 10_000);
      // Stopped, not abandoned: no thread of this process goes on counting. A query left running
      // would use most of a core over this second.
      const cpu = processCpuMs();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const used = processCpuMs() - cpu;
      assert.ok(used < 250, `${used} ms of CPU in the second after the bound`);
      const next = await reads.execute({ sql: "SELECT ? + 1 AS two", args: [1] });
      assert.deepEqual(next.rows, [{ two: 2 }]);
    } finally {
      await reads.close();
    }
  });
});

Deno.test("one slow read does not hold the others: they run on the reader's other connection", async () => {
  await withTempDb(async ({ url }) => {
    const reads = workerReads(url, { boundMs: 3_000, connections: 2 });
    try {
      await reads.execute("SELECT 1");
      const slow = reads.execute(ENDLESS).catch((err) => err);
      const quick: number[] = [];
      for (let i = 0; i < 5; i++) {
        const rows = (await reads.execute({ sql: "SELECT ? AS i", args: [i] })).rows;
        quick.push(Number(rows[0]?.i));
      }
      assert.deepEqual(quick, [0, 1, 2, 3, 4]);
      assert.ok(
        !(await Promise.race([slow.then(() => true), Promise.resolve(false)])),
        "still running",
      );
      assert.ok((await slow) instanceof QueryTooLargeError);
    } finally {
      await reads.close();
    }
  });
});

Deno.test("SQLite's own errors reach the caller with their code; the reader never writes", async () => {
  await withTempDb(async ({ url }) => {
    const reads = workerReads(url);
    try {
      await assert.rejects(reads.execute("SELECT * FROM no_such_table"), /no such table/);
      await assert.rejects(
        reads.execute("INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('x', 1, 1)"),
        (err: Error & { code?: string }) => {
          assert.match(err.code ?? "", /^SQLITE_READONLY/);
          return true;
        },
      );
      assert.deepEqual((await reads.execute("SELECT count(*) AS n FROM instances")).rows, [
        { n: 0 },
      ]);
    } finally {
      await reads.close();
    }
  });
});

/** A worker from `source` (plain JS), as the reader's own is made. */
function workerFrom(source: string): Worker {
  return new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
}

/**
 * The reader's own thread, its driver loading slowly: the load yields to the worker's event loop
 * for `ms` first, as a cold module cache makes it do.
 */
function slowLoadingReader(ms: number): Worker {
  const load =
    `() => new Promise((r) => setTimeout(r, ${ms})).then(() => import("libsql/promise"))`;
  return workerFrom(`// @ts-nocheck\n(${readWorkerMain.toString()})(${load})`);
}

/** A worker that takes every message and answers none. */
const silentWorker = () => workerFrom("globalThis.onmessage = () => {};");

/** `promise`, or a failure naming `what` if it has not settled within `ms` (never a hang). */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

Deno.test("the reader answers its first read when its driver loads after the read was posted", async () => {
  // Deno drops a message that reaches a worker with no listener: a reader that listened only
  // once its driver was in lost the `open` posted at its start, and every read then waited
  // forever (a cold module cache made it the common case).
  await withTempDb(async ({ url }) => {
    const reads = workerReads(url, { worker: () => slowLoadingReader(300) });
    try {
      const result = await within(20_000, "the first read", reads.execute("SELECT 1 AS one"));
      assert.deepEqual(result.rows, [{ one: 1 }]);
    } finally {
      await reads.close();
    }
  });
});

Deno.test("a reader thread that never answers its start: reads go to the fallback past the start bound", async () => {
  await withTempDb(async ({ db, url }) => {
    const told: string[] = [];
    const reads = workerReads(url, {
      worker: silentWorker,
      startBoundMs: 200,
      fallback: db.client,
      onFallback: (err) => told.push(String(err)),
    });
    try {
      const result = await within(20_000, "the read", reads.execute("SELECT 2 AS two"));
      assert.deepEqual(result.rows, [{ two: 2 }]);
      assert.equal(told.length, 1);
      assert.match(told[0]!, /did not answer within 200 ms/);
    } finally {
      await within(20_000, "close", reads.close());
    }
  });
});

Deno.test("without a fallback, a read waiting on a start that never comes is refused at the bound", async () => {
  await withTempDb(async ({ url }) => {
    const reads = workerReads(url, { worker: silentWorker, startBoundMs: 200 });
    try {
      await assert.rejects(
        within(20_000, "the read", reads.execute("SELECT 1")),
        /could not open the database: it did not answer within 200 ms/,
      );
    } finally {
      await within(20_000, "close", reads.close());
    }
  });
});

Deno.test("closing the reader refuses the reads still waiting for its start, and starts nothing", async () => {
  await withTempDb(async ({ db, url }) => {
    let made = 0;
    const reads = workerReads(url, {
      worker: () => (made++, silentWorker()),
      fallback: db.client,
    });
    const waiting = reads.execute("SELECT 1");
    const settled = waiting.then(() => "answered", (err) => err);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await within(20_000, "close", reads.close());
    const outcome = await within(20_000, "the waiting read", settled);
    assert.ok(outcome instanceof ReaderClosedError, String(outcome));
    await assert.rejects(reads.execute("SELECT 1"), ReaderClosedError);
    assert.equal(made, 1);
  });
});

Deno.test("a reader thread that dies refuses the reads it ran, and the next read starts a new one", async () => {
  await withTempDb(async ({ url }) => {
    // Opens, then throws on the first read: an uncaught error ends the worker.
    const dying = () =>
      workerFrom(`globalThis.onmessage = (e) => {
        if (e.data.open) globalThis.postMessage({ id: e.data.id });
        else throw new Error("the reader broke");
      };`);
    let made = 0;
    const reads = workerReads(url, { worker: () => made++ === 0 ? dying() : slowLoadingReader(0) });
    try {
      await assert.rejects(
        within(20_000, "the read", reads.execute("SELECT 1")),
        /the reader broke/,
      );
      const next = await within(20_000, "the next read", reads.execute("SELECT 3 AS three"));
      assert.deepEqual(next.rows, [{ three: 3 }]);
      assert.equal(made, 2);
    } finally {
      await reads.close();
    }
  });
});

Deno.test("the reader's thread takes the nice value given; the serving thread keeps its own", async () => {
  await withTempDb(async ({ url }) => {
    const before = threadNices().filter((n) => n === 14).length;
    const warnings: string[] = [];
    const reads = workerReads(url, { nice: 14, onWarning: (w) => warnings.push(w) });
    try {
      assert.deepEqual((await reads.execute("SELECT 1 AS one")).rows, [{ one: 1 }]);
      assert.deepEqual(warnings, []);
      assert.ok(
        threadNices().filter((n) => n === 14).length >= before + 1,
        `threads at nice 14: ${threadNices().filter((n) => n === 14).length}, ${before} before`,
      );
      assert.equal(ownNice(), 0);
    } finally {
      await reads.close();
    }
  });
});

Deno.test("a reader priority the system refuses is told as a warning and the reads still run", async () => {
  await withTempDb(async ({ url }) => {
    const warnings: string[] = [];
    const reads = workerReads(url, { nice: 40, onWarning: (w) => warnings.push(w) });
    try {
      assert.deepEqual((await reads.execute("SELECT 2 AS two")).rows, [{ two: 2 }]);
      assert.equal(warnings.length, 1);
    } finally {
      await reads.close();
    }
  });
});
