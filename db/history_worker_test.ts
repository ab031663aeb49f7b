import assert from "node:assert/strict";
import { ownNice, threadNices } from "../tests/thread_nices.ts";
import { inProcessExecutor, workerExecutor } from "./batch_executor.ts";
import { historyWorkerMain } from "./history_worker.ts";
import { withTempDb } from "../tests/db_helpers.ts";

Deno.test("the worker executor writes batches off the serving thread and reports SQLite codes", async () => {
  await withTempDb(async ({ db, url }) => {
    const executor = workerExecutor(url);
    try {
      await executor.run([
        {
          sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES (?, 1, 1)",
          args: ["w1"],
        },
        {
          sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES (?, 2, 2)",
          args: ["w2"],
        },
      ]);
      const rows = await db.client.execute("SELECT id FROM instances ORDER BY id");
      assert.deepEqual(rows.rows.map((r) => r.id), ["w1", "w2"]);
      const duplicate = executor.run([
        { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('w1', 3, 3)" },
      ]);
      await assert.rejects(duplicate, (err: Error & { code?: string }) => {
        assert.match(err.code ?? "", /^SQLITE_CONSTRAINT/);
        return true;
      });
      // The connection survives a failed batch.
      await executor.run([
        { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('w3', 4, 4)" },
      ]);
      const after = await db.client.execute("SELECT count(*) AS n FROM instances");
      assert.equal(after.rows[0]?.n, 3);
    } finally {
      await executor.close();
    }
  });
});

Deno.test("where the worker cannot open the database, the fallback writes instead", async () => {
  await withTempDb(async ({ db }) => {
    let reason = "";
    const executor = workerExecutor("file:/proc/no/such/dir/x.db", {
      fallback: inProcessExecutor(db),
      onFallback: (err) => (reason = String(err)),
    });
    try {
      await executor.run([
        { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('fb', 1, 1)" },
      ]);
      const rows = await db.client.execute("SELECT id FROM instances WHERE id = 'fb'");
      assert.equal(rows.rows.length, 1);
      assert.notEqual(reason, "");
    } finally {
      await executor.close();
    }
  });
});

Deno.test("a statement text sent once is reused by later batches, even after a refused batch", async () => {
  await withTempDb(async ({ db, url }) => {
    const executor = workerExecutor(url);
    const insert = "INSERT INTO instances (id, started_at, heartbeat_at) VALUES (?, ?, ?)";
    try {
      await executor.run([{ sql: insert, args: ["t1", 1, 1] }]);
      await executor.run([{ sql: insert, args: ["t2", 2, 2] }, {
        sql: insert,
        args: ["t3", 3, 3],
      }]);
      // The worker learns a text from a batch it refuses, and the next batch names it by number.
      const upsert = "INSERT INTO instances (id, started_at, heartbeat_at) VALUES (?, ?, ?) " +
        "ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at";
      await assert.rejects(executor.run([
        { sql: upsert, args: ["t4", 4, 4] },
        { sql: insert, args: ["t1", 1, 1] },
      ]));
      await executor.run([{ sql: upsert, args: ["t1", 9, 9] }, {
        sql: upsert,
        args: ["t5", 5, 5],
      }]);
      const rows = await db.client.execute("SELECT id, heartbeat_at FROM instances ORDER BY id");
      assert.deepEqual(rows.rows.map((r) => [r.id, r.heartbeat_at]), [
        ["t1", 9],
        ["t2", 2],
        ["t3", 3],
        ["t5", 5],
      ]);
    } finally {
      await executor.close();
    }
  });
});

Deno.test("history batches to a local file commit with synchronous=NORMAL, on the worker or not", async () => {
  await withTempDb(async ({ db, url }) => {
    // docs/scaling.md "Durability of a local file": the setting is per connection, so each
    // batch records the one of the connection it ran on.
    const record = (id: string) => ({
      sql: "INSERT INTO instances (id, started_at, heartbeat_at) " +
        "SELECT ?, synchronous, 0 FROM pragma_synchronous",
      args: [id],
    });
    const worker = workerExecutor(url);
    try {
      await worker.run([record("worker")]);
      await worker.run([record("worker-again")]);
    } finally {
      await worker.close();
    }
    await inProcessExecutor(db).run([record("in-process")]);
    const rows = await db.client.execute("SELECT id, started_at FROM instances ORDER BY id");
    // 1 is NORMAL (SQLite's default, and this database's before, is 2: FULL).
    assert.deepEqual(rows.rows.map((r) => [r.id, r.started_at]), [
      ["in-process", 1],
      ["worker", 1],
      ["worker-again", 1],
    ]);
  });
});

/** A worker that takes every message and answers none. */
function silentWorker(): Worker {
  const source = "globalThis.onmessage = () => {};";
  return new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
}

/** `promise`, or a failure naming `what` if it has not settled within `ms` (never a hang). */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

Deno.test("the history worker answers the batches posted while its driver still loads", async () => {
  // Deno drops a message that reaches a worker with no listener: a worker that listened only
  // once its driver was in lost the `open` posted at its start (a cold module cache made it
  // likely), and every batch, and the gateway's stop, then waited forever.
  await withTempDb(async ({ db, url }) => {
    const load = `() => new Promise((r) => setTimeout(r, 300))
      .then(() => import("@libsql/client/sqlite3"))`;
    const source = `// @ts-nocheck\n(${historyWorkerMain.toString()})(${load})`;
    const executor = workerExecutor(url, {
      worker: () =>
        new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
          type: "module",
        }),
    });
    try {
      await within(
        20_000,
        "the first batch",
        executor.run([
          { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('slow', 1, 1)" },
        ]),
      );
      const rows = await db.client.execute("SELECT id FROM instances WHERE id = 'slow'");
      assert.equal(rows.rows.length, 1);
    } finally {
      await within(20_000, "close", executor.close());
    }
  });
});

Deno.test("a history worker that never answers its start: batches go to the fallback past the bound", async () => {
  // A worker that lost its `open` (Deno drops a message that reaches a worker before it
  // listens) held every batch, and the gateway's stop, forever.
  await withTempDb(async ({ db, url }) => {
    let reason = "";
    const executor = workerExecutor(url, {
      worker: silentWorker,
      startBoundMs: 200,
      fallback: inProcessExecutor(db),
      onFallback: (err) => (reason = String(err)),
    });
    try {
      await within(
        20_000,
        "the batch",
        executor.run([
          { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('late', 1, 1)" },
        ]),
      );
      const rows = await db.client.execute("SELECT id FROM instances WHERE id = 'late'");
      assert.equal(rows.rows.length, 1);
      assert.match(reason, /did not open the database within 200 ms/);
    } finally {
      await within(20_000, "close", executor.close());
    }
  });
});

Deno.test("a history worker that dies refuses its batches at once, and later ones go to the fallback", async () => {
  await withTempDb(async ({ db, url }) => {
    // Opens, then throws on the first batch: an uncaught error ends the worker.
    const source = `globalThis.onmessage = (e) => {
      if (e.data.open) globalThis.postMessage({ id: e.data.id, changes: [] });
      else throw new Error("the writer broke");
    };`;
    const told: string[] = [];
    const executor = workerExecutor(url, {
      worker: () =>
        new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
          type: "module",
        }),
      fallback: inProcessExecutor(db),
      onFallback: (err) => told.push(String(err)),
    });
    const insert = (id: string) => [
      { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES (?, 1, 1)", args: [id] },
    ];
    try {
      await assert.rejects(
        within(20_000, "the batch", executor.run(insert("lost"))),
        /the writer broke/,
      );
      await within(20_000, "the next batch", executor.run(insert("kept")));
      const rows = await db.client.execute("SELECT id FROM instances ORDER BY id");
      assert.deepEqual(rows.rows.map((r) => r.id), ["kept"]);
      assert.equal(told.length, 1);
    } finally {
      await within(20_000, "close", executor.close());
    }
  });
});

Deno.test("the writer's thread runs at the nice value it is given, and the serving thread keeps its own", async () => {
  await withTempDb(async ({ url }) => {
    const before = threadNices().filter((n) => n === 13).length;
    const warnings: string[] = [];
    const executor = workerExecutor(url, { nice: 13, onWarning: (w) => warnings.push(w) });
    try {
      await executor.run([
        { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('n1', 1, 1)" },
      ]);
      assert.deepEqual(warnings, []);
      assert.equal(threadNices().filter((n) => n === 13).length, before + 1);
      // This thread (the serving one in a gateway) is not lowered with it.
      assert.equal(ownNice(), 0);
    } finally {
      await executor.close();
    }
  });
});

Deno.test("a priority the system refuses is told as a warning and the writer still writes", async () => {
  await withTempDb(async ({ db, url }) => {
    const warnings: string[] = [];
    // Beyond 19: node:os refuses it, as a system without the call would.
    const executor = workerExecutor(url, { nice: 40, onWarning: (w) => warnings.push(w) });
    try {
      await executor.run([
        { sql: "INSERT INTO instances (id, started_at, heartbeat_at) VALUES ('n2', 1, 1)" },
      ]);
      assert.equal(warnings.length, 1);
      const rows = await db.client.execute("SELECT id FROM instances WHERE id = 'n2'");
      assert.equal(rows.rows.length, 1);
    } finally {
      await executor.close();
    }
  });
});
