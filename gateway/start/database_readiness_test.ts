import assert from "node:assert/strict";
import { inProcessExecutor } from "../../db/batch_executor.ts";
import { getRequest } from "../../db/history_queries.ts";
import { HistoryWriter } from "../../db/history_writer.ts";
import { migrate } from "../../db/migrate.ts";
import { systemClock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { DatabaseReadiness } from "./database_readiness.ts";
import { gated } from "./open_history.ts";
import { requestRecord, withTempDb } from "../../tests/db_helpers.ts";

/**
 * docs/deploy.md: a remote database away at start. No sqld runs here, so the return is played
 * on a local file behind a preparation that fails until the database "answers".
 */
Deno.test("rows wait in memory while the database is away and are written after the catch-up", async () => {
  await withTempDb(async ({ db }) => {
    const events: string[] = [];
    const log: Logger = { event: (name) => events.push(name) };
    const order: string[] = [];
    let away = true;
    const readiness = new DatabaseReadiness(async () => {
      if (away) throw new TypeError("fetch failed: connection refused");
      await migrate(db);
    }, { clock: systemClock(), log });
    readiness.onReady(() => Promise.resolve(void order.push("catch-up")));
    const writer = new HistoryWriter(db, {
      executor: gated(readiness, inProcessExecutor(db)),
      onBatch: () => order.push("rows written"),
    });
    try {
      writer.writeRequest(requestRecord({ id: "kept", state: "closed", outcome: "success" }));
      assert.equal(await writer.flush(), false, "nothing lands while the database is away");
      assert.equal(await writer.flush(), false);
      assert.equal(writer.stats().pending, 1, "the row is kept");
      assert.equal(await getRequest(db, "kept"), null);
      assert.match(readiness.describe() ?? "", /^history database unreachable since \S+: fetch/);
      assert.deepEqual(events, ["history.database_unreachable"], "said once, not per retry");

      away = false;
      assert.equal(await writer.flush(), true);
      assert.deepEqual(order, ["catch-up", "rows written"], "the catch-up runs before any row");
      assert.equal((await getRequest(db, "kept"))?.state, "closed");
      assert.equal(readiness.describe(), null);
      assert.deepEqual(events, ["history.database_unreachable", "history.database_back"]);
    } finally {
      await writer.close();
    }
  });
});

Deno.test("with no database at all, nothing is tried and the reason is kept", async () => {
  let tries = 0;
  const readiness = new DatabaseReadiness(() => Promise.resolve(void tries++), {
    clock: systemClock(),
    log: { event: () => {} },
    absent: "no FFI here",
  });
  assert.equal(await readiness.ensure(), false);
  assert.equal(tries, 0);
  assert.equal(readiness.describe(), "no database: no FFI here");
});
