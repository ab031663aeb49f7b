import { eventually } from "../tests/harness.ts";
import assert from "node:assert/strict";
import { countRequests, getRequest, listAttempts, requestExists } from "./history_queries.ts";
import type { InStatement } from "@libsql/client";
import { inProcessExecutor } from "./batch_executor.ts";
import { HistoryWriter } from "./history_writer.ts";
import { closeInterruptedRows, heartbeat, registerInstance } from "./instances.ts";
import type { RequestRecord } from "./records.ts";
import {
  attemptRecord,
  lockDatabase,
  manualTimers,
  requestRecord,
  withTempDb,
} from "../tests/db_helpers.ts";

const closed = requestRecord({
  state: "closed",
  endedAt: 2_500,
  status: 200,
  outcome: "success",
  upstream: "claude",
  upstreamModel: "claude-sonnet-4-5",
  firstContentMs: 300,
  durationMs: 1_500,
  inputTokens: 12,
  outputTokens: 34,
  cachedTokens: 0,
  reasoningTokens: 5,
  sessionId: "s-1",
  stream: false,
});

Deno.test("a request opened and closed within one batch is written once, as closed", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord());
    writer.writeRequest(closed);
    assert.equal(writer.stats().pending, 1);
    assert.equal(await writer.flush(), true);
    assert.deepEqual(writer.stats(), {
      pending: 0,
      dropped: 0,
      written: 1,
      failures: 0,
      rejected: 0,
      lastError: null,
      failingSince: null,
      capacity: 100_000,
    });
    assert.deepEqual(await getRequest(db, "req-1"), closed);
    assert.equal(await countRequests(db), 1);
    await writer.close();
  });
});

Deno.test("a request id is known while queued and once stored; a closed row is final", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(closed);
    assert.equal(writer.holdsRequest("req-1"), true);
    assert.equal(await requestExists(db, "req-1"), false);
    await writer.flush();
    assert.equal(writer.holdsRequest("req-1"), false);
    assert.equal(await requestExists(db, "req-1"), true);
    assert.equal(await requestExists(db, "req-2"), false);
    writer.writeRequest(requestRecord({ keyId: "intruder" }));
    assert.equal(await writer.flush(), true);
    assert.deepEqual(await getRequest(db, "req-1"), closed);
    await writer.close();
  });
});

Deno.test("a later version replaces the stored row", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord());
    await writer.flush();
    assert.equal((await getRequest(db, "req-1"))?.state, "open");
    writer.writeRequest(closed);
    await writer.flush();
    assert.deepEqual(await getRequest(db, "req-1"), closed);
    assert.equal(await countRequests(db), 1);
    await writer.close();
  });
});

Deno.test("attempts upsert by (request id, hop)", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord());
    writer.writeAttempt(attemptRecord());
    await writer.flush();
    const failed = attemptRecord({
      outcome: "idle_timeout",
      errorCode: "gw.upstream.idle_timeout",
      errorMessage: "no content for 300 s",
      headersMs: 80,
      durationMs: 300_000,
      inputTokens: 100,
    });
    const second = attemptRecord({
      hop: 2,
      upstream: "openai",
      model: "gpt-5",
      outcome: "success",
      status: 200,
      startedAt: 301_100,
      headersMs: 50,
      firstContentMs: 120,
      durationMs: 900,
      inputTokens: 100,
      outputTokens: 20,
    });
    writer.writeAttempt(second);
    writer.writeAttempt(failed);
    // Another request's hop 1 must not collide with ours.
    writer.writeAttempt(attemptRecord({ requestId: "req-2" }));
    assert.equal(await writer.flush(), true);
    assert.deepEqual(await listAttempts(db, "req-1"), [failed, second]);
    assert.equal((await listAttempts(db, "req-2")).length, 1);
    await writer.close();
  });
});

Deno.test("a locked database keeps rows queued; they land exactly once after", async () => {
  await withTempDb(async ({ db, url }) => {
    const errors: unknown[] = [];
    const writer = new HistoryWriter(db, { ...manualTimers, onError: (e) => errors.push(e) });
    const lock = await lockDatabase(url);
    try {
      writer.writeRequest(requestRecord());
      writer.writeAttempt(attemptRecord());
      assert.equal(await writer.flush(), false);
      // Newer versions queued during the outage win over the ones that failed.
      writer.writeRequest(closed);
      assert.equal(await writer.flush(), false);
      const stats = writer.stats();
      assert.equal(stats.pending, 2);
      assert.ok(stats.failures >= 2);
      assert.match(stats.lastError ?? "", /lock|busy/i);
      assert.equal(errors.length, stats.failures);
    } finally {
      await lock.release();
    }
    assert.equal(await writer.flush(), true);
    assert.deepEqual(await getRequest(db, "req-1"), closed);
    assert.equal((await listAttempts(db, "req-1")).length, 1);
    const stats = writer.stats();
    assert.equal(stats.pending, 0);
    assert.equal(stats.written, 2);
    assert.equal(await countRequests(db), 1);
    await writer.close();
  });
});

Deno.test("the background loop writes on its own and retries after an outage", async () => {
  await withTempDb(async ({ db, url }) => {
    const writer = new HistoryWriter(db, { flushEveryMs: 5 });
    writer.writeRequest(requestRecord({ id: "first" }));
    await eventually(async () => (await countRequests(db)) === 1, { what: "the first row" });

    const lock = await lockDatabase(url);
    writer.writeRequest(requestRecord({ id: "second" }));
    await eventually(() => Promise.resolve(writer.stats().failures > 0), {
      what: "a failed write",
    });
    await lock.release();
    await eventually(async () => (await getRequest(db, "second")) !== null, {
      what: "the retried row",
    });
    assert.equal(writer.stats().pending, 0);
    await writer.close();
  });
});

Deno.test("the injected clock drives the loop and close cancels its timer", async () => {
  await withTempDb(async ({ db }) => {
    const timers: { ms: number; fire: () => void; cancelled: boolean }[] = [];
    const after = (ms: number, fire: () => void) => {
      const timer = { ms, fire, cancelled: false };
      timers.push(timer);
      return () => {
        timer.cancelled = true;
      };
    };
    const writer = new HistoryWriter(db, { flushEveryMs: 20, after });
    writer.writeRequest(requestRecord());
    writer.writeRequest(closed);
    assert.deepEqual(timers.map((t) => t.ms), [20]); // one timer per batch, not per row
    timers[0]?.fire();
    await eventually(async () => (await countRequests(db)) === 1, { what: "the timed flush" });
    await writer.flush(); // nothing in flight from here on
    writer.writeRequest(requestRecord({ id: "req-2" }));
    assert.equal(timers.length, 2, "an idle writer arms one timer for the new row");
    await writer.close();
    assert.equal(timers[1]?.cancelled, true);
    assert.equal(await countRequests(db), 2);
  });
});

Deno.test("maxPending drops the oldest rows and counts them", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, { ...manualTimers, maxPending: 3 });
    for (const id of ["r1", "r2", "r3"]) writer.writeRequest(requestRecord({ id }));
    // Updating r1 makes it the youngest, so r2 and r3 are the oldest now.
    writer.writeRequest(requestRecord({ id: "r1", state: "closed" }));
    writer.writeRequest(requestRecord({ id: "r4" }));
    writer.writeRequest(requestRecord({ id: "r5" }));
    assert.equal(writer.stats().pending, 3);
    assert.equal(writer.stats().dropped, 2);
    assert.equal(await writer.close(), true);
    const ids = await db.client.execute("SELECT id FROM requests ORDER BY id");
    assert.deepEqual(ids.rows.map((row) => row.id), ["r1", "r4", "r5"]);
  });
});

Deno.test("batches are split by batchSize and all rows land", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, { ...manualTimers, batchSize: 7 });
    for (let i = 0; i < 50; i++) writer.writeRequest(requestRecord({ id: `r${i}` }));
    assert.equal(await writer.close(), true);
    assert.equal(await countRequests(db), 50);
    assert.equal(writer.stats().written, 50);
  });
});

Deno.test("a row the database refuses is dropped alone; the rest of its batch lands", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    const malformed = { ...requestRecord({ id: "bad" }), clientFormat: null };
    writer.writeRequest(requestRecord({ id: "good-1" }));
    writer.writeRequest(malformed as unknown as RequestRecord);
    writer.writeRequest(requestRecord({ id: "good-2" }));
    assert.equal(await writer.close(), true);
    assert.equal(await countRequests(db), 2);
    assert.equal(await getRequest(db, "bad"), null);
    assert.equal(writer.stats().rejected, 1);
    assert.equal(writer.stats().failures, 0);
  });
});

Deno.test("closeInterruptedRows closes open rows of dead instances only", async () => {
  await withTempDb(async ({ db }) => {
    const now = 1_000_000;
    await registerInstance(db, "dead", { now: now - 120_000 });
    await registerInstance(db, "live", { now: now - 60_000 });
    await heartbeat(db, "live", { now: now - 1_000 });
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord({ id: "dead-open", instanceId: "dead" }));
    writer.writeRequest(requestRecord({ id: "unknown-open", instanceId: "never-registered" }));
    writer.writeRequest({ ...closed, id: "dead-closed", instanceId: "dead" });
    writer.writeRequest(requestRecord({ id: "live-open", instanceId: "live" }));
    writer.writeRequest(requestRecord({ id: "mine", instanceId: "me" }));
    writer.writeAttempt(attemptRecord({ requestId: "dead-open", hop: 1, outcome: "error" }));
    writer.writeAttempt(attemptRecord({ requestId: "dead-open", hop: 2 }));
    writer.writeAttempt(attemptRecord({ requestId: "live-open" }));
    assert.equal(await writer.close(), true);

    const closedCount = await closeInterruptedRows(db, {
      instanceId: "me",
      now,
      staleAfterMs: 30_000,
    });
    assert.equal(closedCount, 2);

    const interrupted = await getRequest(db, "dead-open");
    assert.equal(interrupted?.state, "interrupted");
    assert.equal(interrupted?.outcome, "error");
    assert.equal(interrupted?.failureSource, "gateway");
    assert.equal(interrupted?.errorCode, "gw.gateway.interrupted");
    assert.equal(interrupted?.errorMessage, "gateway stopped before the request ended");
    assert.equal(interrupted?.endedAt, now);
    assert.equal((await getRequest(db, "unknown-open"))?.state, "interrupted");
    assert.deepEqual(await getRequest(db, "dead-closed"), {
      ...closed,
      id: "dead-closed",
      instanceId: "dead",
    });
    assert.equal((await getRequest(db, "live-open"))?.state, "open");
    assert.equal((await getRequest(db, "mine"))?.state, "open");

    const [first, second] = await listAttempts(db, "dead-open");
    assert.equal(first?.errorCode, null); // already finished: left as it was
    assert.equal(second?.outcome, "error");
    assert.equal(second?.errorCode, "gw.gateway.interrupted");
    assert.equal((await listAttempts(db, "live-open"))[0]?.outcome, null);

    assert.equal(
      await closeInterruptedRows(db, { instanceId: "me", now, staleAfterMs: 30_000 }),
      0,
    );
  });
});

Deno.test("deferred open rows: a short request is written once, a long one as open after the delay", async () => {
  await withTempDb(async ({ db }) => {
    let now = 1_000;
    const writer = new HistoryWriter(db, { flushEveryMs: 1, deferOpenMs: 500, now: () => now });
    try {
      writer.writeRequest(requestRecord({ id: "short" }));
      writer.writeRequest(requestRecord({ id: "long" }));
      await new Promise((r) => setTimeout(r, 30)); // background loop runs: nothing is due
      assert.equal(writer.stats().written, 0);
      writer.writeRequest(requestRecord({ id: "short", state: "closed", outcome: "success" }));
      await eventually(async () => (await getRequest(db, "short"))?.state === "closed", {
        what: "short row",
      });
      assert.equal(await getRequest(db, "long"), null, "still in its deferral");
      now += 600;
      await eventually(async () => (await getRequest(db, "long"))?.state === "open", {
        what: "long row",
      });
      assert.equal(writer.stats().written, 2, "the short request cost one write");
    } finally {
      await writer.close();
    }
  });
});

Deno.test("rows that arrive while a batch is written wait for the next tick, as one batch", async () => {
  const runs: { rows: number; done: () => void }[] = [];
  const timers: (() => void)[] = [];
  const writer = new HistoryWriter(null as never, {
    executor: {
      run: (statements) =>
        new Promise<void>((done) => {
          let values = 0;
          for (const s of statements) {
            if (typeof s !== "string" && Array.isArray(s.args)) values += s.args.length;
          }
          // A request row binds one value per field.
          runs.push({ rows: values / Object.keys(requestRecord()).length, done });
        }),
      close: () => Promise.resolve(),
    },
    after: (_ms, fn) => {
      timers.push(fn);
      return () => {};
    },
  });
  writer.writeRequest(requestRecord({ id: "r1", state: "closed" }));
  timers.shift()!();
  assert.deepEqual(runs.map((r) => r.rows), [1]);
  writer.writeRequest(requestRecord({ id: "r2", state: "closed" }));
  writer.writeRequest(requestRecord({ id: "r3", state: "closed" }));
  runs[0]!.done();
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(runs.map((r) => r.rows), [1], "r2 and r3 wait for the timer");
  assert.equal(timers.length, 1, "the loop re-armed its timer for them");
  timers.shift()!();
  assert.deepEqual(runs.map((r) => r.rows), [1, 2]);
  runs[1]!.done();
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(writer.stats().written, 3);
  assert.equal(writer.stats().pending, 0);
});

Deno.test("failingSince: set by the first failed write, kept through retries, cleared by a success", async () => {
  await withTempDb(async ({ db }) => {
    let now = 5_000;
    let down = true;
    const executor = {
      run: (statements: InStatement[]) =>
        down ? Promise.reject(new Error("database or disk is full")) : inner.run(statements),
      close: () => Promise.resolve(),
    };
    const inner = inProcessExecutor(db);
    const writer = new HistoryWriter(db, { ...manualTimers, executor, now: () => now });
    writer.writeRequest(closed);
    assert.equal(writer.stats().failingSince, null, "nothing written yet: nothing failed");
    assert.equal(await writer.flush(), false);
    assert.deepEqual([writer.stats().failingSince, writer.stats().lastError], [
      5_000,
      "database or disk is full",
    ]);
    now = 9_000;
    assert.equal(await writer.flush(), false);
    assert.equal(writer.stats().failingSince, 5_000, "since the first failure of the run");
    down = false;
    assert.equal(await writer.flush(), true);
    assert.equal(writer.stats().failingSince, null);
    assert.ok(await getRequest(db, "req-1"));
  });
});
