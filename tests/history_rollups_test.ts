import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { costTotals } from "../db/cost_queries.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { trendBuckets } from "../db/trend_queries.ts";
import {
  attemptRecord,
  insertAsStored,
  manualTimers,
  requestRecord,
  withTempDb,
} from "./db_helpers.ts";
import {
  assertSameRollups,
  FlakyExecutor,
  NOW,
  rollupsFromRows,
  storedRollups,
  writeVariedHistory,
} from "./rollup_history.ts";

/**
 * docs/scaling.md "Rollups": the rollups the triggers keep equal the rows they summarise, after
 * every write of a varied history (rows written open then closed, hops before their request, a
 * batch retried after its commit, a failed one, final rows written twice, a reused id, a dead
 * instance's rows closed as interrupted); an upgraded database gets the same from its rows; and
 * they stay when the rows are deleted.
 */

Deno.test("rollups equal the rows they summarise, after every write of a varied history", async () => {
  await withTempDb(async ({ db }) => {
    let checks = 0;
    await writeVariedHistory(db, {
      check: async () => {
        checks++;
        assertSameRollups(await storedRollups(db), await rollupsFromRows(db));
      },
    });
    assert.equal(checks, 6);
    const requests = await db.client.execute(
      "SELECT SUM(requests) AS n FROM rollup_requests WHERE bucket_ms = 86400000",
    );
    assert.equal(requests.rows[0]?.n, 300, "each request once, in its final state");
  });
});

Deno.test("a batch whose commit's answer is lost is written again and counted once", async () => {
  await withTempDb(async ({ db }) => {
    const executor = new FlakyExecutor(db);
    const writer = new HistoryWriter(db, { ...manualTimers, executor });
    writer.writeRequest(requestRecord({ id: "r", state: "closed", outcome: "success" }));
    writer.writeAttempt(attemptRecord({ requestId: "r", outcome: "idle_timeout" }));
    writer.writeAttempt(attemptRecord({ requestId: "r", hop: 2, upstream: "other" }));
    executor.next = "lose-reply";
    assert.equal(await writer.flush(), false);
    assert.equal(await writer.flush(), true);
    const sums = await db.client.execute(
      "SELECT SUM(requests) AS requests, SUM(idle_timeouts) AS idle, SUM(failovers) AS failovers " +
        "FROM rollup_requests WHERE bucket_ms = 60000",
    );
    assert.deepEqual({ ...sums.rows[0] }, { requests: 1, idle: 1, failovers: 1 });
    const hops = await db.client.execute(
      "SELECT SUM(hops) AS hops FROM rollup_hops WHERE bucket_ms = 60000",
    );
    assert.equal(hops.rows[0]?.hops, 2);
  });
});

Deno.test("an upgraded database gets the rollups of the rows it had", async () => {
  await withTempDb(async ({ db }) => {
    await writeVariedHistory(db);
    const dir = await Deno.makeTempDir({ prefix: "pulsegate_rollups_" });
    const old = await openDatabase(`file:${dir}/old.db`);
    try {
      // The release before the rollups, with the same rows.
      // (Migrations after it apply too: they are checked on their own, and an upgrade from then
      // applies them in order.)
      const before = MIGRATIONS.slice(0, MIGRATIONS.findIndex((m) => m.name === "history_rollups"));
      await migrate(old, { migrations: before });
      const requests = (await db.client.execute("SELECT * FROM requests")).rows;
      const attempts = (await db.client.execute("SELECT * FROM attempts")).rows;
      await insertAsStored(old, { table: "requests", rows: requests });
      await insertAsStored(old, { table: "attempts", rows: attempts });
      assert.deepEqual(
        (await migrate(old)).applied,
        MIGRATIONS.slice(before.length).map((m) => m.version),
      );
      assertSameRollups(await storedRollups(old), await rollupsFromRows(db));
      assertSameRollups(await storedRollups(old), await storedRollups(db));
    } finally {
      old.close();
      await Deno.remove(dir, { recursive: true });
    }
  });
});

Deno.test("rollups hold no reference to rows: trends and costs stay when the rows are deleted", async () => {
  await withTempDb(async ({ db }) => {
    await writeVariedHistory(db);
    const day = 86_400_000;
    // Whole minutes at both ends: nothing is read from rows.
    const since = Math.floor((NOW - 3 * day) / 60_000) * 60_000;
    const until = Math.ceil(NOW / 60_000) * 60_000;
    const read = async () => ({
      rollups: await storedRollups(db),
      costs: await Promise.all(
        (["route", "key", "upstream"] as const).map((by) => costTotals(db, { by, since, until })),
      ),
      trends: await trendBuckets(db, {
        from: Math.ceil(NOW / 900_000) * 900_000 - day,
        bucketMs: 900_000,
        buckets: 96,
      }),
    });
    const kept = await read();
    assert.ok(kept.costs[0]!.length > 2 && kept.trends.some((b) => b.failovers > 0));
    await db.client.execute("DELETE FROM attempts");
    await db.client.execute("DELETE FROM requests");
    const after = await read();
    assertSameRollups(after.rollups, kept.rollups);
    assert.deepEqual(after.costs, kept.costs);
    assert.deepEqual(after.trends, kept.trends);
  });
});
