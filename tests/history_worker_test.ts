import assert from "node:assert/strict";
import { inProcessExecutor, workerExecutor } from "../db/batch_executor.ts";
import { withTempDb } from "./db_helpers.ts";

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
