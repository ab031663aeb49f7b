import assert from "node:assert/strict";
import { QueryTooLargeError } from "../db/read_db.ts";
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
