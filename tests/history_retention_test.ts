import assert from "node:assert/strict";
import type { InStatement } from "@libsql/client";
import { type BatchExecutor, inProcessExecutor, workerExecutor } from "../db/batch_executor.ts";
import { openDatabase } from "../db/client.ts";
import type { Db } from "../db/client.ts";
import { HistoryPruner, type Upkeep } from "../db/history_pruner.ts";
import { DAY_MS, historyFootprint, pruneRollupStep } from "../db/history_retention.ts";
import { upsertAttempts, upsertRequests } from "../db/history_rows.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { migrate } from "../db/migrate.ts";
import type { RequestRecord } from "../db/records.ts";
import { num } from "../db/row_values.ts";
import { autoVacuumAtStart } from "../db/auto_vacuum.ts";
import { Exporter } from "../gateway/observability/exporter.ts";
import { createLogger } from "../gateway/runtime/logger.ts";
import { attemptRecord, manualTimers, requestRecord, withTempDb } from "./db_helpers.ts";
import { VirtualClock } from "./virtual_clock.ts";
import { ROLLUP_TABLES } from "../gateway/start/start_retention.ts";

/** docs/scaling.md "Retention": what history keeps, and that keeping it never costs new rows. */

const NOW = Date.UTC(2027, 0, 31, 12);
const POLICY = { retentionDays: 30, rollupRetentionDays: 400 };
const WINDOW_FROM = NOW - 30 * DAY_MS;

function clockAt(now: number) {
  return { now: () => now, after: () => () => {} };
}

async function store(db: Db, requests: RequestRecord[], opts: { hops?: number } = {}) {
  const attempts = requests.flatMap((r) =>
    Array.from({ length: opts.hops ?? 2 }, (_, i) =>
      attemptRecord({
        requestId: r.id,
        hop: i + 1,
        startedAt: r.startedAt,
        outcome: r.state === "open" ? null : "success",
      }))
  );
  await db.client.batch([...upsertRequests(requests), ...upsertAttempts(attempts)], "write");
}

function finished(id: string, startedAt: number, state: RequestRecord["state"] = "closed") {
  return requestRecord({
    id,
    startedAt,
    state,
    endedAt: state === "open" ? null : startedAt + 1_000,
    outcome: state === "open" ? null : state === "closed" ? "success" : "error",
    status: state === "open" ? null : 200,
  });
}

async function ids(db: Db, table: "requests" | "attempts"): Promise<string[]> {
  const column = table === "requests" ? "id" : "request_id";
  const rows = await db.client.execute(`SELECT DISTINCT ${column} AS id FROM ${table} ORDER BY id`);
  return rows.rows.map((row) => String(row.id));
}

async function orphanAttempts(db: Db): Promise<number> {
  const rows = await db.client.execute(
    "SELECT count(*) AS n FROM attempts WHERE request_id NOT IN (SELECT id FROM requests)",
  );
  return num(rows.rows[0]!, "n");
}

// Age (before NOW) × state × whether an export destination still has it queued. `kept`: after
// a run while the destination still lacks "old-unexported" (everything from its start on stays);
// `keptAfter`: after a run once it has it.
const CASES: {
  id: string;
  startedAt: number;
  state: RequestRecord["state"];
  unexported?: true;
  kept: boolean;
  keptAfter: boolean;
}[] = [
  {
    id: "old-closed",
    startedAt: WINDOW_FROM - 5 * DAY_MS,
    state: "closed",
    kept: false,
    keptAfter: false,
  },
  {
    id: "old-interrupted",
    startedAt: WINDOW_FROM - 4 * DAY_MS,
    state: "interrupted",
    kept: false,
    keptAfter: false,
  },
  {
    id: "old-running",
    startedAt: WINDOW_FROM - 5 * DAY_MS,
    state: "open",
    kept: true,
    keptAfter: true,
  },
  {
    id: "old-unexported",
    startedAt: WINDOW_FROM - 3 * DAY_MS,
    state: "closed",
    unexported: true,
    kept: true,
    keptAfter: false,
  },
  {
    id: "old-after-unexported",
    startedAt: WINDOW_FROM - DAY_MS,
    state: "closed",
    kept: true,
    keptAfter: false,
  },
  {
    id: "old-interrupted-after",
    startedAt: WINDOW_FROM - DAY_MS / 2,
    state: "interrupted",
    kept: true,
    keptAfter: false,
  },
  { id: "just-out", startedAt: WINDOW_FROM - 1, state: "closed", kept: true, keptAfter: false },
  { id: "edge", startedAt: WINDOW_FROM, state: "closed", kept: true, keptAfter: true },
  { id: "inside", startedAt: NOW - DAY_MS, state: "closed", kept: true, keptAfter: true },
  { id: "inside-running", startedAt: NOW - 1_000, state: "open", kept: true, keptAfter: true },
];

Deno.test("retention removes exactly the requests older than the window, not running, exported", async () => {
  await withTempDb(async ({ db }) => {
    await store(db, CASES.map((c) => finished(c.id, c.startedAt, c.state)));
    // A destination that is down: the record it has not received stays queued in the exporter.
    const clock = new VirtualClock(NOW);
    const exporter = new Exporter({
      clock,
      env: () => undefined,
      fetch: () => Promise.reject(new Error("down")),
      log: createLogger({ quiet: true }),
    });
    exporter.setDestinations([{
      id: "sink",
      kind: "webhook",
      url: "http://127.0.0.1:9/",
      enabled: true,
      headers_env: {},
    }]);
    for (const c of CASES.filter((c) => c.unexported)) {
      exporter.push({ request: finished(c.id, c.startedAt), attempts: [] });
    }
    const writer = new HistoryWriter(db, manualTimers);
    const pruner = new HistoryPruner(db, {
      writer,
      clock: clockAt(NOW),
      policy: () => POLICY,
      holdFrom: () => exporter.oldestQueuedStart(),
      batch: 1, // a step per request
    });
    const report = await pruner.pruneNow();
    const kept = CASES.filter((c) => c.kept).map((c) => c.id).sort();
    assert.deepEqual(await ids(db, "requests"), kept);
    assert.deepEqual(await ids(db, "attempts"), kept, "each removed request's attempts went too");
    assert.equal(await orphanAttempts(db), 0);
    assert.equal(report?.requests, CASES.length - kept.length);
    assert.equal(report?.attempts, 2 * (CASES.length - kept.length));
    assert.equal(report?.heldFrom, WINDOW_FROM - 3 * DAY_MS);
    // Once the destination has it, the rest past the window goes.
    exporter.setDestinations([]);
    assert.equal(exporter.oldestQueuedStart(), null);
    const after = await pruner.pruneNow();
    const keptAfter = CASES.filter((c) => c.keptAfter).map((c) => c.id).sort();
    assert.deepEqual(await ids(db, "requests"), keptAfter);
    assert.deepEqual(await ids(db, "attempts"), keptAfter);
    assert.equal(after?.heldFrom, null);
    assert.equal(pruner.status().removedTotal, CASES.length - keptAfter.length);
    await writer.close();
  });
});

/**
 * An executor whose every transaction waits until the test releases it, recording what ran and
 * that no two ever overlap.
 */
function heldExecutor(opts: { prunable: number }) {
  let left = opts.prunable;
  const log: ("rows" | "upkeep")[] = [];
  const held: (() => void)[] = [];
  let inFlight = 0;
  let overlaps = 0;
  const executor: BatchExecutor = {
    run: (statements: InStatement[]) => {
      const sql = typeof statements[0] === "string" ? statements[0] : statements[0]?.sql ?? "";
      const kind = sql.startsWith("INSERT") ? "rows" : "upkeep";
      log.push(kind);
      if (++inFlight > 1) overlaps++;
      return new Promise<number[]>((resolve) => {
        held.push(() => {
          inFlight--;
          if (kind === "rows" || !sql.startsWith("DELETE FROM attempts")) return resolve([0, 0]);
          const removed = Math.min(left, 10);
          left -= removed;
          resolve([removed, removed]);
        });
      });
    },
    close: () => Promise.resolve(),
  };
  return {
    executor,
    log,
    overlaps: () => overlaps,
    /** Lets the oldest held transaction end; false when none is held. */
    async release(): Promise<boolean> {
      const next = held.shift();
      if (!next) return false;
      next();
      for (let i = 0; i < 10; i++) await Promise.resolve();
      await new Promise((resolve) => setTimeout(resolve, 0));
      return true;
    },
  };
}

Deno.test("pruning a large backlog delays a batch of new rows by at most one prune step", async () => {
  await withTempDb(async ({ db }) => {
    const held = heldExecutor({ prunable: 500 });
    let fire: (() => void) | null = null;
    const writer = new HistoryWriter(db, {
      executor: held.executor,
      after: (_ms, fn) => {
        fire = fn;
        return () => {
          fire = null;
        };
      },
    });
    const pruner = new HistoryPruner(db, {
      writer,
      clock: clockAt(NOW),
      policy: () => POLICY,
      batch: 10,
    });
    const run = pruner.pruneNow();
    await new Promise((resolve) => setTimeout(resolve, 0));
    // Rows arrive while each of twenty prune steps is in flight, and the writer's timer fires.
    const stepsStartedBefore: number[] = [];
    for (let round = 0; round < 20; round++) {
      assert.equal(held.log.at(-1), "upkeep", "a prune step is in flight");
      writer.writeRequest(finished(`new-${round}`, NOW));
      (fire as (() => void) | null)?.();
      await new Promise((resolve) => setTimeout(resolve, 0));
      const asked = held.log.length;
      let at = -1;
      while ((at = held.log.indexOf("rows", asked)) < 0) {
        assert.ok(await held.release(), "something is held until the rows' batch runs");
      }
      stepsStartedBefore.push(held.log.slice(asked, at).filter((k) => k === "upkeep").length);
      assert.ok(await held.release(), "the rows' batch ends");
    }
    while (await held.release());
    await run;
    assert.equal(held.overlaps(), 0, "a batch of rows and a prune step never run at once");
    // The rows waited for the one step in flight when they came, and no step started after it.
    assert.deepEqual(stepsStartedBefore, Array(20).fill(0));
    assert.ok(held.log.filter((k) => k === "upkeep").length >= 20, "the backlog was pruned");
    await writer.close();
  });
});

async function fillOld(db: Db, opts: { old: number; inside: number }) {
  const requests: RequestRecord[] = [];
  for (let i = 0; i < opts.old; i++) {
    requests.push(finished(`o-${String(i).padStart(6, "0")}`, WINDOW_FROM - DAY_MS + i));
  }
  for (let i = 0; i < opts.inside; i++) {
    requests.push(finished(`i-${String(i).padStart(6, "0")}`, NOW - DAY_MS + i));
  }
  for (let at = 0; at < requests.length; at += 500) {
    await store(db, requests.slice(at, at + 500));
  }
}

Deno.test("a gateway closed mid-prune loses nothing inside the window, and the next run finishes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate_prune_" });
  const url = `file:${dir}/history.db`;
  try {
    const first = await openDatabase(url);
    await migrate(first);
    await fillOld(first, { old: 3_000, inside: 400 });
    const worker = workerExecutor(url);
    let steps = 0;
    let stop: (() => void) | null = null;
    const counting: BatchExecutor = {
      run: (statements) => {
        if (++steps === 3) stop?.();
        return worker.run(statements);
      },
      close: () => worker.close(),
    };
    const writer = new HistoryWriter(first, { ...manualTimers, executor: counting });
    const pruner = new HistoryPruner(first, {
      writer,
      clock: clockAt(NOW),
      policy: () => POLICY,
      batch: 250,
    });
    // Shutdown as the gateway's closers run it, begun while the third step is on its way.
    let closing: Promise<void> | null = null;
    stop = () => {
      closing = (async () => {
        await pruner.close();
        await writer.close();
        await counting.close();
        first.close();
      })();
    };
    await pruner.pruneNow();
    await closing;
    const again = await openDatabase(url);
    try {
      const left = await ids(again, "requests");
      assert.equal(left.filter((id) => id.startsWith("i-")).length, 400, "the window is whole");
      const oldLeft = left.filter((id) => id.startsWith("o-")).length;
      assert.ok(oldLeft > 0 && oldLeft < 3_000, `stopped part-way (${oldLeft} old left)`);
      assert.equal(await orphanAttempts(again), 0, "no request lost its attempts half-way");
      // The oldest went first: what is left past the window is its newest part.
      const firstOld = left.find((id) => id.startsWith("o-"));
      assert.equal(firstOld, `o-${String(3_000 - oldLeft).padStart(6, "0")}`);
      const writer2 = new HistoryWriter(again, manualTimers);
      const pruner2 = new HistoryPruner(again, {
        writer: writer2,
        clock: clockAt(NOW),
        policy: () => POLICY,
      });
      assert.equal((await pruner2.pruneNow())?.requests, oldLeft);
      assert.equal((await ids(again, "requests")).length, 400);
      await writer2.close();
    } finally {
      again.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("rollups are pruned by a table and minute column given, whole minutes, older first", async () => {
  await withTempDb(async ({ db }) => {
    // A stand-in for the per-minute rollup table: minute numbers, several rows a minute.
    await db.client.execute(`CREATE TABLE rollup_standin (minute INTEGER NOT NULL,
      route TEXT NOT NULL, requests INTEGER NOT NULL, PRIMARY KEY (minute, route)) WITHOUT ROWID`);
    const minute = (ms: number) => Math.floor(ms / 60_000);
    const cutoff = NOW - 400 * DAY_MS;
    const minutes = [cutoff - 90 * DAY_MS, cutoff - 61_000, cutoff - 60_000, cutoff, NOW]
      .map(minute);
    for (const m of minutes) {
      for (const route of ["a", "b"]) {
        await db.client.execute({
          sql: "INSERT INTO rollup_standin VALUES (?, ?, 1)",
          args: [m, route],
        });
      }
    }
    const writer = new HistoryWriter(db, manualTimers);
    const pruner = new HistoryPruner(db, {
      writer,
      clock: clockAt(NOW),
      policy: () => POLICY,
      rollups: [{ table: "rollup_standin", minuteColumn: "minute", unitMs: 60_000 }],
    });
    const report = await pruner.pruneNow();
    const left = await db.client.execute("SELECT DISTINCT minute FROM rollup_standin ORDER BY 1");
    assert.deepEqual(left.rows.map((r) => num(r, "minute")), [minute(cutoff), minute(NOW)]);
    assert.equal(report?.rollupRows, 6);
    // The requests' own window (30 days) does not reach rollups: they outlive rows.
    assert.throws(() =>
      pruneRollupStep({ table: "x; DROP", minuteColumn: "m" }, {
        cutoff,
        minutes: 1,
      })
    );
    await writer.close();
  });
});

Deno.test("the real rollups outlive rows and go bucket by bucket once wholly older than rollup_retention_days", async () => {
  await withTempDb(async ({ db }) => {
    const cutoff = NOW - POLICY.rollupRetentionDays * DAY_MS;
    // Its minute, quarter hour and day all end before the cutoff.
    const gone = cutoff - DAY_MS - 60_000;
    // Its minute and quarter hour end before the cutoff; its UTC day straddles it.
    const partly = cutoff - 20 * 60_000;
    const kept = cutoff + 60_000;
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(finished("gone", gone));
    writer.writeRequest(finished("partly", partly));
    writer.writeRequest(finished("kept", kept));
    writer.writeAttempt(attemptRecord({ requestId: "partly", startedAt: partly }));
    assert.equal(await writer.flush(), true);
    const pruner = new HistoryPruner(db, {
      writer,
      clock: clockAt(NOW),
      policy: () => POLICY,
      rollups: ROLLUP_TABLES,
    });
    await pruner.pruneNow();
    assert.deepEqual(await ids(db, "requests"), [], "rows go after 30 days");
    const sizes = async (table: string) => {
      const rows = await db.client.execute(
        `SELECT bucket_ms, bucket_start FROM ${table} ORDER BY bucket_ms, bucket_start`,
      );
      return rows.rows.map((r) => [num(r, "bucket_ms"), num(r, "bucket_start")]);
    };
    const start = (at: number, ms: number) => at - at % ms;
    assert.deepEqual(await sizes("rollup_requests"), [
      [60_000, start(kept, 60_000)],
      [900_000, start(kept, 900_000)],
      [86_400_000, start(partly, 86_400_000)],
    ]);
    assert.deepEqual(await sizes("rollup_hops"), [[86_400_000, start(partly, 86_400_000)]]);
    await writer.close();
  });
});

for (const thread of ["worker", "this"] as const) {
  Deno.test(`a new file gives free pages back (${thread} thread): under steady load past the window it stops growing`, async () => {
    await withTempDb(async ({ db, url }) => {
      assert.equal((await historyFootprint(db)).autoVacuum, "incremental");
      const executor = thread === "worker" ? workerExecutor(url) : inProcessExecutor(db);
      const writer = new HistoryWriter(db, { ...manualTimers, executor });
      let now = NOW;
      const pruner = new HistoryPruner(db, {
        writer,
        clock: { now: () => now, after: () => () => {} },
        policy: () => ({ retentionDays: 3, rollupRetentionDays: 400 }),
        vacuum: true,
      });
      const sizes: number[] = [];
      for (let day = 0; day < 10; day++) {
        const requests = Array.from(
          { length: 600 },
          (_, i) => finished(`d${day}-${String(i).padStart(4, "0")}`, now - DAY_MS + i * 1000),
        );
        for (let at = 0; at < requests.length; at += 200) {
          await store(db, requests.slice(at, at + 200));
        }
        await pruner.pruneNow();
        sizes.push((await historyFootprint(db)).bytes);
        now += DAY_MS;
      }
      // Three days kept (plus the one being written): the size at day 5 is the size at day 10.
      const settled = sizes.slice(5);
      assert.ok(
        Math.max(...settled) <= Math.min(...settled) * 1.1,
        `the file kept growing past the window: ${sizes.join(", ")}`,
      );
      assert.ok(Math.max(...settled) < sizes[9]! * 1.1 && sizes[9]! < 3 * sizes[2]!);
      assert.equal((await historyFootprint(db)).freeBytes, 0, "free pages went back to the disk");
      await writer.close();
      await executor.close();
    });
  });
}

Deno.test("an older file without auto_vacuum is switched at start when small, left when large", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate_av_" });
  try {
    for (
      const [name, maxBytes, done] of [["small", undefined, "vacuumed"], [
        "large",
        1,
        "left",
      ]] as const
    ) {
      const path = `${dir}/${name}.db`;
      // As a release before this one made it: tables first, no auto_vacuum.
      const { createClient } = await import("@libsql/client");
      const old = createClient({ url: `file:${path}` });
      await old.execute("PRAGMA journal_mode=WAL");
      await old.execute("CREATE TABLE t (x)");
      old.close();
      const db = await openDatabase(`file:${path}`);
      await migrate(db);
      assert.equal((await historyFootprint(db)).autoVacuum, "none");
      assert.equal((await autoVacuumAtStart(db, { maxBytes })).done, done);
      const mode = (await historyFootprint(db)).autoVacuum;
      assert.equal(mode, done === "vacuumed" ? "incremental" : "none");
      db.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the upkeep of a failing database rejects, and the writer's rows stay queued", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, {
      ...manualTimers,
      executor: { run: () => Promise.reject(new Error("disk I/O error")), close: async () => {} },
    });
    const upkeep: Upkeep = writer;
    writer.writeRequest(finished("queued", NOW));
    await assert.rejects(upkeep.upkeep(["SELECT 1"]), /disk I\/O error/);
    assert.equal(writer.stats().pending, 1);
    const pruner = new HistoryPruner(db, { writer, clock: clockAt(NOW), policy: () => POLICY });
    assert.equal(await pruner.pruneNow(), null);
    assert.match(pruner.status().lastError ?? "", /disk I\/O error/);
    writer.abandon();
  });
});
