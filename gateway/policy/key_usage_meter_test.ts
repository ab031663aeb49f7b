import assert from "node:assert/strict";
import type { InStatement, TransactionMode } from "@libsql/client";
import type { Db } from "../../db/client.ts";
import { admitUnderKeyLimits } from "./key_limits.ts";
import { KeyUsageMeter } from "./key_usage_meter.ts";
import type { GatewayKey } from "../config/schema.ts";
import type { Logger } from "../runtime/logger.ts";
import { Metrics } from "../runtime/metrics.ts";
import { withTempDb } from "../../tests/db_helpers.ts";
import { VirtualClock } from "../../tests/virtual_clock.ts";

/** docs/scaling.md "Shared through libSQL": two meters on one database stand for two instances. */

const sum = (rows: { kind: string; requests: number }[]) =>
  rows.filter((r) => r.kind === "second").reduce((n, r) => n + r.requests, 0);
const cost = (rows: { kind: string; costUsd: number }[]) =>
  rows.filter((r) => r.kind === "day").reduce((n, r) => n + r.costUsd, 0);
/** How long a read of the shared counters serves (key_usage_meter.ts `CACHE_MS`). */
const CACHE_MS = 1_000;
/** Moves the test's clock to the end of the read cache, to the millisecond. */
const pastCache = (clock: VirtualClock) => clock.advance(CACHE_MS);

Deno.test("meter: own use counts at once, another instance's after its next read, never twice", async () => {
  await withTempDb(async ({ db }) => {
    const clock = new VirtualClock();
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
    pastCache(clock);
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 2, "a fresh read includes A's own writes once");
    b.add("k", { requests: 1 });
    await b.flush();
    assert.equal(sum(a.rows("k")), 2, "A's cached read does not see B yet");
    clock.advance(CACHE_MS - 1);
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 2, "nor 1 ms before its cache ends");
    clock.advance(1);
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 3, "and does at its next read, a second after the last");
    assert.equal(sum(a.rows("other")), 0);
  });
});

Deno.test("meter: a database that fails keeps the use counted here and writes it later", async () => {
  await withTempDb(async ({ db }) => {
    const clock = new VirtualClock();
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
    pastCache(clock);
    await a.refresh(["k"]);
    assert.equal(sum(a.rows("k")), 2, "counted once after the read");
  });
});

/** A database whose reads fail (while `down` says so) and whose writes succeed. */
function failingReads(db: Db, down = () => true): Db {
  const client = new Proxy(db.client, {
    get: (target, name) =>
      name === "batch"
        ? (statements: InStatement[], mode?: TransactionMode) =>
          mode === "read" && down()
            ? Promise.reject(new Error("reads down"))
            : target.batch(statements, mode)
        : Reflect.get(target, name).bind(target),
  });
  return { ...db, client };
}

Deno.test("meter: while reads fail and writes succeed, this process's own use still counts", async () => {
  await withTempDb(async ({ db }) => {
    const clock = new VirtualClock();
    let down = true;
    const meter = new KeyUsageMeter({ db: failingReads(db, () => down), clock });
    for (let i = 0; i < 4; i++) {
      await meter.refresh(["k"]);
      meter.add("k", { requests: 1, costUsd: 0.25 });
      await meter.flush();
      pastCache(clock);
    }
    await meter.refresh(["k"]);
    assert.equal(sum(meter.rows("k")), 4, "every written request is still counted here");
    assert.equal(cost(meter.rows("k")), 1);
    const stored = await db.client.execute(
      "SELECT SUM(requests) AS n FROM key_usage WHERE kind = 'second'",
    );
    assert.equal(Number(stored.rows[0]?.n), 4, "and written");
    down = false;
    pastCache(clock);
    await meter.refresh(["k"]);
    assert.equal(sum(meter.rows("k")), 4, "once reads are back, counted once");
    assert.equal(cost(meter.rows("k")), 1);
  });
});

Deno.test("meter: rpm holds while reads fail and writes succeed", async () => {
  await withTempDb(async ({ db }) => {
    const clock = new VirtualClock();
    const meter = new KeyUsageMeter({ db: failingReads(db), clock });
    const key = { id: "k", key_env: "K", rpm: 3 } as GatewayKey;
    const verdicts: string[] = [];
    for (let i = 0; i < 6; i++) {
      const verdict = await admitUnderKeyLimits(key, { meter, now: clock.now }).then(
        () => "admitted",
        (err) => err.code,
      );
      verdicts.push(verdict);
      await meter.flush();
      pastCache(clock);
    }
    assert.deepEqual(verdicts, [
      ...Array(3).fill("admitted"),
      ...Array(3).fill("gw.key.rate_limited"),
    ]);
  });
});

Deno.test("meter: a failing read is retried once per cache period, and logged once", async () => {
  await withTempDb(async ({ db }) => {
    let reads = 0;
    const counted = failingReads(db);
    const client = new Proxy(counted.client, {
      get: (target, name) =>
        name === "batch"
          ? (statements: InStatement[], mode?: TransactionMode) => {
            if (mode === "read") reads++;
            return target.batch(statements, mode);
          }
          : Reflect.get(target, name).bind(target),
    });
    const events: string[] = [];
    const log: Logger = { event: (name) => void events.push(name) };
    const clock = new VirtualClock();
    const meter = new KeyUsageMeter({ db: { ...db, client }, clock, log });
    for (let i = 0; i < 10; i++) {
      await meter.refresh(["k"]);
      clock.advance(99);
    }
    clock.advance(CACHE_MS - 1 - 990);
    await meter.refresh(["k"]);
    assert.equal(reads, 1, "not one read per request while the database fails them");
    clock.advance(1);
    await meter.refresh(["k"]);
    assert.equal(reads, 2, "asked again once the failed read's second is over");
    assert.deepEqual(events, ["key_usage.read_failed"]);
  });
});

/** An executor over the real database that refuses, as a constraint would, any batch naming `bad`. */
function refusingKey(db: Db, bad: string) {
  const refused: string[] = [];
  return {
    refused,
    writes: {
      run: async (statements: InStatement[]) => {
        if (statements.some((s) => typeof s !== "string" && s.args?.[0 as never] === bad)) {
          refused.push(bad);
          throw Object.assign(new Error("NOT NULL constraint failed: key_usage.cost_usd"), {
            code: "SQLITE_CONSTRAINT_NOTNULL",
          });
        }
        await db.client.batch(statements, "write" as TransactionMode);
      },
      close: () => Promise.resolve(),
    },
  };
}

Deno.test("meter: a row the database refuses never holds back other keys' rows, and is set aside after its tries", async () => {
  await withTempDb(async ({ db }) => {
    const clock = new VirtualClock();
    const { refused, writes } = refusingKey(db, "bad");
    const events: { name: string; fields: Record<string, unknown> }[] = [];
    const log = {
      event: (name: string, fields: Record<string, unknown>) => events.push({ name, fields }),
    } as unknown as Logger;
    const metrics = new Metrics();
    const meter = new KeyUsageMeter({ db, clock, writes, log, metrics });
    meter.add("bad", { requests: 1, costUsd: 0.25 });
    meter.add("good", { requests: 1, costUsd: 0.5 });
    await meter.flush();
    const written = await db.client.execute(
      "SELECT key_id, cost_usd FROM key_usage WHERE kind = 'day'",
    );
    assert.deepEqual(written.rows.map((r) => [r.key_id, r.cost_usd]), [["good", 0.5]]);
    // Tried alone with the next writes, then set aside: logged, counted, still this process's.
    meter.add("good", { requests: 1 });
    await meter.flush();
    meter.add("good", { requests: 1 });
    await meter.flush();
    assert.equal(
      refused.length,
      1 + 3,
      "once in the batch with the others, then three tries alone",
    );
    assert.equal(metrics.keyUsageSetAside.get(), 1);
    assert.deepEqual(
      events.filter((e) => e.name === "key_usage.row_set_aside").map((e) => e.fields.key),
      ["bad"],
    );
    assert.equal(cost(meter.rows("bad")), 0.25, "still counted against its key here");
    meter.add("good", { requests: 1 });
    await meter.flush();
    assert.equal(refused.length, 4, "never sent again");
    const good = await db.client.execute(
      "SELECT SUM(requests) AS n FROM key_usage WHERE key_id = 'good' AND kind = 'day'",
    );
    assert.equal(Number(good.rows[0]!.n), 4);
  });
});

Deno.test("meter: an amount that is not finite and 0 or more counts as 0, so a budget is never NaN nor credited", async () => {
  await withTempDb(async ({ db }) => {
    const clock = new VirtualClock();
    const meter = new KeyUsageMeter({ db, clock });
    meter.add("k", { requests: 1, tokens: Infinity, costUsd: NaN });
    meter.add("k", { requests: 1, tokens: -5, costUsd: -999.99 });
    meter.add("k", { requests: 1, tokens: 10, costUsd: 0.5 });
    assert.equal(cost(meter.rows("k")), 0.5);
    await meter.flush();
    pastCache(clock);
    await meter.refresh(["k"]);
    assert.equal(cost(meter.rows("k")), 0.5);
    assert.equal(sum(meter.rows("k")), 3);
  });
});
