import assert from "node:assert/strict";
import { KeyUsageMeter } from "../gateway/accept/key_usage_meter.ts";
import { createClock } from "../gateway/runtime/clock.ts";
import { withTempDb } from "./db_helpers.ts";
import { TEST_SCALE } from "./harness.ts";

/** docs/scaling.md "Key limits": two meters on one database stand for two instances. */

const sum = (rows: { kind: string; requests: number }[]) =>
  rows.filter((r) => r.kind === "second").reduce((n, r) => n + r.requests, 0);
const cost = (rows: { kind: string; costUsd: number }[]) =>
  rows.filter((r) => r.kind === "day").reduce((n, r) => n + r.costUsd, 0);
// Past the read cache (1 s configured, 10 ms at the test scale) with a wide margin.
const pastCache = () => new Promise((r) => setTimeout(r, 60));

Deno.test("meter: own use counts at once, another instance's after its next read, never twice", async () => {
  await withTempDb(async ({ db }) => {
    const clock = createClock(TEST_SCALE);
    const a = new KeyUsageMeter({ db, clock });
    const b = new KeyUsageMeter({ db, clock });
    await a.refresh(["k"]);
    a.add("k", { requests: 1 });
    a.add("k", { requests: 1, tokens: 30, costUsd: 0.5 });
    assert.equal(sum(a.rows("k")), 2, "seen here before any write");
    await a.flush();
    await b.refresh(["k"]);
    assert.equal(sum(b.rows("k")), 2, "B reads A's written use");
    assert.equal(cost(b.rows("k")), 0.5);
    await pastCache();
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 2, "a fresh read includes A's own writes once");
    b.add("k", { requests: 1 });
    await b.flush();
    assert.equal(sum(a.rows("k")), 2, "A's cached read does not see B yet");
    await pastCache();
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 3, "and does after its next read");
    assert.equal(sum(a.rows("other")), 0);
  });
});

Deno.test("meter: a database that fails keeps the use counted here and writes it later", async () => {
  await withTempDb(async ({ db }) => {
    const clock = createClock(TEST_SCALE);
    let down = true;
    const client = new Proxy(db.client, {
      get: (target, name) =>
        name === "batch" && down
          ? () => Promise.reject(new Error("down"))
          : Reflect.get(target, name).bind(target),
    });
    const a = new KeyUsageMeter({ db: { ...db, client }, clock });
    a.add("k", { requests: 1 });
    await a.flush();
    assert.equal(sum(a.rows("k")), 1, "kept while unwritten");
    const stored = async () =>
      Number(
        (await db.client.execute("SELECT SUM(requests) AS n FROM key_usage WHERE kind = 'second'"))
          .rows[0]?.n ?? 0,
      );
    assert.equal(await stored(), 0);
    down = false;
    a.add("k", { requests: 1 });
    await a.flush();
    assert.equal(await stored(), 2, "the earlier use went with the next write");
    await pastCache();
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 2, "counted once after the read");
  });
});
