import assert from "node:assert/strict";
import type { InStatement, InValue } from "@libsql/client";
import { inProcessExecutor } from "../db/batch_executor.ts";
import { getRequest, listAttempts } from "../db/history_queries.ts";
import {
  ATTEMPT_COLUMNS,
  REQUEST_COLUMNS,
  writeAttemptValues,
  writeRequestValues,
} from "../db/history_rows.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { bind } from "../db/row_values.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { billingFor } from "../gateway/live/billing.ts";
import { LiveRequest } from "../gateway/live/live_request.ts";
import { systemClock } from "../gateway/runtime/clock.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import { manualTimers, requestRecord, withTempDb } from "./db_helpers.ts";

/**
 * docs/design.md "History": a request hands the writer its one live record, and a request that
 * ends within a batch is written once, from its final state. Nothing of it may be lost on the way.
 */

function prices() {
  const checked = validateConfig({
    upstreams: [
      { id: "a", kind: "openai-chat", prices: { "m-a": { input: 3, output: 15 } } },
      { id: "b", kind: "anthropic", prices: { "m-b": { input: 1, output: 2 } } },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "a", model: "m-a" }, { upstream: "b", model: "m-b" }],
    }],
  });
  assert.ok(checked.ok);
  return checked.config;
}

function withoutTrace<T extends { trace?: unknown }>(record: T): Omit<T, "trace"> {
  const { trace: _, ...row } = record;
  return row;
}

/** A request through two hops, every field of its row and theirs set by the way it ran. */
function runRequest(sink: HistoryWriter, opts: { id: string; fail: boolean }): LiveRequest {
  const live = new LiveRequest({
    id: opts.id,
    instanceId: "inst-1",
    clientFormat: "anthropic",
    route: "smart",
    stream: true,
    keyId: "k1",
    sessionId: "s-9",
  }, {
    clock: systemClock(),
    sink,
    metrics: new Metrics(),
    refusal: { held: true, claim: () => true, release: () => {} },
  });
  live.billWith(billingFor(prices()));
  live.routed("smart");
  // The session's cache was warm on "warm": this hop moved away from it.
  const first = live.startAttempt("a", "m-a", { movedFrom: "warm" });
  first.sent({ droppedHeaders: "anthropic-beta: context-1m-2025-08-07", trace: null });
  first.headers(200);
  first.firstContent();
  first.usage({
    inputTokens: 1_000,
    outputTokens: 5,
    cachedTokens: 10,
    reasoningTokens: 2,
    cacheWriteTokens: 300,
    cacheWrite1hTokens: 100,
  });
  live.contentSent();
  first.end(
    "idle_timeout",
    new GatewayError("no content for 300 s", {
      code: "gw.upstream.idle_timeout_mid_stream",
    }),
  );
  const second = live.startAttempt("b", "m-b", { resumeOffset: 5 });
  second.headers(200);
  second.firstContent();
  second.usage({ inputTokens: 1_100, outputTokens: 40 });
  second.estimate({ answered: true });
  second.end("resumed");
  // A tool call's fields (docs/mcp.md "History and metrics"), set here so every column carries a value.
  live.tool({ server: "tools", bytesIn: 120, bytesOut: 4_096 });
  live.finish(
    opts.fail
      ? {
        status: 502,
        error: new GatewayError("upstream broke off", { code: "gw.upstream.error" }),
      }
      : { status: 200 },
  );
  return live;
}

Deno.test("a request written within one batch lands once per row, with every field of its final state", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, { ...manualTimers, deferOpenMs: 60_000 });
    const ok = runRequest(writer, { id: "ok", fail: false });
    const failed = runRequest(writer, { id: "failed", fail: true });
    assert.equal(writer.stats().pending, 6, "a row per request and per hop, each queued once");
    assert.equal(await writer.flush(), true);
    assert.equal(writer.stats().written, 6, "each row written once");
    for (const live of [ok, failed]) {
      const stored = await getRequest(db, live.record.id);
      assert.deepEqual(stored, withoutTrace(live.record));
      assert.deepEqual(
        await listAttempts(db, live.record.id),
        live.attempts.map((a) => withoutTrace(a.record)),
      );
    }
    // Every column carries a value in one of them: none is dropped on the way.
    const rows: Record<string, unknown>[] = [
      withoutTrace(ok.record),
      withoutTrace(failed.record),
      ...[...ok.attempts, ...failed.attempts].map((a) => withoutTrace(a.record)),
    ];
    const requestFields = Object.keys(rows[0]!);
    for (const field of requestFields) {
      assert.ok(rows.slice(0, 2).some((r) => r[field] !== null), `request ${field} is set`);
    }
    for (const field of Object.keys(rows[2]!)) {
      assert.ok(rows.slice(2).some((r) => r[field] !== null), `attempt ${field} is set`);
    }
    assert.equal((await getRequest(db, "ok"))?.costUsd, ok.record.costUsd);
    assert.ok((ok.record.costUsd ?? 0) > 0);
  });
});

Deno.test("a record changed while its batch is being written is written again by the next", async () => {
  await withTempDb(async ({ db }) => {
    const inner = inProcessExecutor(db);
    const gate = Promise.withResolvers<void>();
    const written: string[] = [];
    const executor = {
      run: async (statements: InStatement[]) => {
        await gate.promise;
        for (const s of statements) {
          if (typeof s !== "string" && Array.isArray(s.args)) written.push(String(s.args[2]));
        }
        await inner.run(statements);
      },
      close: () => Promise.resolve(),
    };
    const writer = new HistoryWriter(db, { ...manualTimers, executor });
    const record: RequestRecord = requestRecord({ id: "moving" });
    writer.writeRequest(record);
    // The batch is built (the open row) and waits on the database.
    const flushed = writer.flush();
    await new Promise((resolve) => setTimeout(resolve, 0));
    // The request ends meanwhile: the same record, changed in place, is written again.
    Object.assign(record, { state: "closed", outcome: "success", status: 200, endedAt: 1_500 });
    writer.writeRequest(record);
    gate.resolve();
    assert.equal(await flushed, true);
    assert.deepEqual(
      written,
      ["open", "closed"],
      "the batch in flight wrote what it was built from",
    );
    assert.deepEqual(await getRequest(db, "moving"), record);
    assert.equal(writer.stats().written, 2);
    assert.equal(writer.stats().pending, 0);
  });
});

Deno.test("a hop that ends after its request's row was written is written on its own", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    const live = new LiveRequest({
      id: "late",
      instanceId: "inst-1",
      clientFormat: "openai-chat",
      route: "smart",
      stream: false,
      keyId: null,
      sessionId: null,
    }, { clock: systemClock(), sink: writer, metrics: new Metrics() });
    const hop = live.startAttempt("a", "m-a");
    live.finish({ status: 200 });
    assert.equal(await writer.flush(), true);
    const before: AttemptRecord | undefined = (await listAttempts(db, "late"))[0];
    assert.equal(before?.outcome, null);
    hop.end("hedge_lost");
    assert.equal(await writer.flush(), true);
    assert.equal((await listAttempts(db, "late"))[0]?.outcome, "hedge_lost");
    assert.equal((await getRequest(db, "late"))?.state, "closed");
  });
});

Deno.test("each row's values are written in its table's column order, bound as before", () => {
  // A distinct value in every field, so a value in the wrong place shows.
  const distinct = (columns: Record<string, string>, kinds: Record<string, unknown>) =>
    Object.fromEntries(
      Object.keys(columns).map((
        field,
        i,
      ) => [field, field in kinds ? kinds[field] : `${field}-${i}`]),
    );
  const cases: [
    Record<string, string>,
    Record<string, unknown>,
    (r: never, out: InValue[]) => void,
  ][] = [
    [REQUEST_COLUMNS, {
      startedAt: 11,
      endedAt: 12,
      stream: true,
      status: 201,
      firstContentMs: 13,
      durationMs: Infinity,
      inputTokens: 14,
      outputTokens: 15,
      cachedTokens: NaN,
      reasoningTokens: 16,
      tokensEstimated: false,
      costUsd: 0.5,
      keyId: null,
      cacheWriteTokens: 17,
      cacheWrite1hTokens: 18,
      cacheWriteUsd: 0.125,
      bytesIn: 31,
      bytesOut: 32,
    }, writeRequestValues],
    [ATTEMPT_COLUMNS, {
      hop: 2,
      status: 504,
      startedAt: 21,
      headersMs: 22,
      firstContentMs: null,
      durationMs: 23,
      inputTokens: 24,
      outputTokens: 25,
      tokensEstimated: true,
      costUsd: 0.25,
      resumeOffset: 26,
      cachedTokens: 27,
      cacheWriteTokens: 28,
      cacheWrite1hTokens: 29,
      cacheWriteUsd: 0.0625,
    }, writeAttemptValues],
  ];
  for (const [columns, kinds, write] of cases) {
    const record = distinct(columns, kinds);
    const out: InValue[] = ["before"];
    write(record as never, out);
    assert.deepEqual(
      out.slice(1),
      Object.keys(columns).map((field) => bind(record[field] as never)),
    );
  }
});
