import assert from "node:assert/strict";
import { HistoryWriter } from "../db/history_writer.ts";
import { getRequest } from "../db/history_queries.ts";
import {
  KEY_REFUSED_ROWS_PER_MINUTE,
  REFUSED_ROWS_PER_MINUTE,
} from "../gateway/policy/refused_budget.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { chatRoute, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { lockDatabase, manualTimers, requestRecord, withTempDb } from "./db_helpers.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const chat = { model: "smart", messages: [{ role: "user", content: "hi" }] };

Deno.test("a 401 flood gets a bounded number of rows and the real request after it its own", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const config = { ...chatRoute([up.url]), keys: [{ id: "app", key_env: "APP_KEY" }] };
  const gw = await startTestGateway(config, { env: { APP_KEY: "real-key" } });
  try {
    const flood = 4 * REFUSED_ROWS_PER_MINUTE;
    const refusedIds: string[] = [];
    for (let wave = 0; wave < flood / 20; wave++) {
      await Promise.all(Array.from({ length: 20 }, async (_, i) => {
        const res = await postJson(`${gw.url}/v1/chat/completions`, chat, {
          authorization: `Bearer wrong-${wave}-${i}`,
        });
        assert.equal(res.status, 401, "every refusal is still answered");
        assert.equal((await res.json()).error.code, "gw.client.unauthorized");
        refusedIds.push(res.headers.get("x-request-id")!);
      }));
    }
    const real = await postJson(`${gw.url}/v1/chat/completions`, chat, {
      authorization: "Bearer real-key",
    });
    assert.equal(real.status, 200);
    await real.body?.cancel();
    const { request } = await gw.row(real.headers.get("x-request-id")!);
    assert.equal(request.status, 200);
    assert.equal(request.keyId, "app");

    const stored = await gw.db.client.execute(
      "SELECT COUNT(*) AS n FROM requests WHERE status = 401",
    );
    assert.equal(Number(stored.rows[0]!.n), REFUSED_ROWS_PER_MINUTE, "one minute's budget of rows");
    const unrecorded = flood - REFUSED_ROWS_PER_MINUTE;
    assert.equal(gw.metrics.refusedUnrecorded.get(), unrecorded);
    assert.match(
      gw.metrics.render(),
      new RegExp(`^pulsegate_refused_unrecorded_total ${unrecorded}$`, "m"),
    );
    // The first refusals of the minute are the recorded ones; an unrecorded id has no row.
    assert.equal(await getRequest(gw.db, refusedIds.at(-1)!), null);
    assert.equal(gw.writer.stats().dropped, 0);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("the writer drops refused rows first, and never a real one for them", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, { ...manualTimers, maxPending: 10, maxExpendable: 4 });
    const real = (i: number) => requestRecord({ id: `real-${i}`, state: "closed", status: 200 });
    const refused = (i: number) =>
      requestRecord({ id: `refused-${i}`, state: "closed", status: 401, keyId: null });
    for (let i = 0; i < 3; i++) writer.writeRequest(real(i));
    for (let i = 0; i < 50; i++) writer.writeRequest(refused(i), { expendable: true });
    assert.equal(writer.stats().pending, 3 + 4, "refused rows are bounded on their own");
    for (let i = 3; i < 8; i++) writer.writeRequest(real(i));
    assert.equal(writer.stats().pending, 10, "the pending bound still holds");
    // 46 refused rows not queued beyond their own bound, then the two oldest queued ones left
    // for five real ones.
    assert.equal(writer.stats().dropped, 46 + 2);
    assert.equal(await writer.close(), true);
    for (let i = 0; i < 8; i++) assert.ok(await getRequest(db, `real-${i}`), `real-${i} is kept`);
    assert.equal(await getRequest(db, "refused-1"), null, "pushed out for a real row");
    assert.ok(await getRequest(db, "refused-2"), "the refused rows queued first still fit");
    assert.ok(await getRequest(db, "refused-3"));
    assert.equal(await getRequest(db, "refused-4"), null, "not queued beyond the bound");
  });
});

const FLOOD_KEYS = { FLOOD_KEY: "sk-flood", PAY_KEY: "sk-pay", SLOPPY_KEY: "sk-sloppy" };

/**
 * Keys on one priced route: `flooder` at rpm 3, `payer` unlimited and billed, `sloppy` unlimited
 * (its bad bodies are refused as bad input, not by a rate limit checked before the body).
 */
function floodConfig(url: string): ConfigInput {
  return {
    upstreams: [{
      id: "up1",
      kind: "openai-chat",
      base_url: url,
      prices: { "model-1": { input: 10, output: 20 } },
    }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "model-1" }] }],
    keys: [
      { id: "flooder", key_env: "FLOOD_KEY", rpm: 3 },
      { id: "payer", key_env: "PAY_KEY" },
      { id: "sloppy", key_env: "SLOPPY_KEY" },
    ],
  };
}

/** `count` requests with `key`, `width` at a time; the statuses answered, by status. */
async function flood(
  url: string,
  opts: { key: string; count: number; width?: number; body?: unknown },
): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  const width = opts.width ?? 50;
  for (let sent = 0; sent < opts.count; sent += width) {
    await Promise.all(
      Array.from({ length: Math.min(width, opts.count - sent) }, async () => {
        const res = await postJson(`${url}/v1/chat/completions`, opts.body ?? chat, {
          authorization: `Bearer ${opts.key}`,
        });
        await res.body?.cancel();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }),
    );
  }
  return statuses;
}

async function countRows(gw: TestGateway, where: string): Promise<number> {
  const result = await gw.db.client.execute(`SELECT COUNT(*) AS n FROM requests WHERE ${where}`);
  return Number(result.rows[0]!.n);
}

Deno.test("a key at rpm 3 sending 2,000 requests gets its budget of refusal rows, the rest counted", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const gw = await startTestGateway(floodConfig(up.url), { env: FLOOD_KEYS });
  try {
    const statuses = await flood(gw.url, { key: "sk-flood", count: 2_000 });
    assert.deepEqual([...statuses].sort(), [[200, 3], [429, 1_997]], "every request is answered");
    // Another key's refusal is recorded: the flood did not spend its budget.
    const other = await postJson(`${gw.url}/v1/chat/completions`, { ...chat, model: "nope" }, {
      authorization: "Bearer sk-pay",
    });
    assert.equal(other.status, 404);
    const { request } = await gw.row(other.headers.get("x-request-id")!);
    assert.deepEqual([request.keyId, request.status], ["payer", 404]);

    await gw.writer.flush();
    assert.equal(await countRows(gw, "key_id = 'flooder' AND status = 200"), 3);
    assert.equal(
      await countRows(gw, "key_id = 'flooder' AND status = 429"),
      KEY_REFUSED_ROWS_PER_MINUTE,
      "one minute's budget of the key's refusals is recorded",
    );
    const unrecorded = 1_997 - KEY_REFUSED_ROWS_PER_MINUTE;
    assert.equal(gw.metrics.keyRefusalsUnrecorded.get(), unrecorded);
    assert.match(
      gw.metrics.render(),
      new RegExp(`^pulsegate_key_refusals_unrecorded_total ${unrecorded}$`, "m"),
    );
    assert.equal(gw.metrics.refusedUnrecorded.get(), 0, "the pre-auth budget is another one");
    assert.equal(gw.writer.stats().dropped, 0);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("with the history queue full during an outage, refusal floods never push out a billed row", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1_000, output: 1_000 } }),
  });
  const gw = await startTestGateway(floodConfig(up.url), {
    env: FLOOD_KEYS,
    // The database is held locked below: its writes must wait on their own thread, as served.
    historyWorker: true,
    historyMemoryRows: 40,
  });
  const lock = await lockDatabase(`file:${gw.dir}/pulsegate.db`);
  let locked = true;
  try {
    const paid = await postJson(`${gw.url}/v1/chat/completions`, chat, {
      authorization: "Bearer sk-pay",
    });
    assert.equal(paid.status, 200);
    await paid.body?.cancel();
    const paidId = paid.headers.get("x-request-id")!;
    assert.equal(await gw.writer.flush(), false, "the database refuses writes");
    // After auth (429 beyond rpm, bad bodies) and before it (401): far more than the queue holds.
    const limited = await flood(gw.url, { key: "sk-flood", count: 500 });
    assert.deepEqual([...limited].sort(), [[200, 3], [429, 497]]);
    const bad = await flood(gw.url, { key: "sk-sloppy", count: 200, body: "{not json" });
    assert.deepEqual([...bad], [[400, 200]]);
    const wrong = await flood(gw.url, { key: "sk-wrong", count: 200 });
    assert.deepEqual([...wrong], [[401, 200]]);
    assert.ok(gw.writer.stats().pending <= 40, "the queue stays at its bound");
    assert.ok(gw.writer.stats().dropped > 0, "refused rows were dropped for the bound");

    await lock.release();
    locked = false;
    const { request, attempts } = await gw.row(paidId);
    assert.deepEqual([request.keyId, request.status], ["payer", 200]);
    assert.ok((request.costUsd ?? 0) > 0, "the billed row landed with its cost");
    assert.equal(attempts.length, 1);
    assert.equal(await countRows(gw, "key_id = 'flooder' AND status = 200"), 3, "real rows kept");
  } finally {
    if (locked) await lock.release();
    await gw.stop();
    await up.close();
  }
});

Deno.test("a queue full of real rows refuses a refused request's row rather than drop a real one", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, { ...manualTimers, maxPending: 3 });
    for (let i = 0; i < 3; i++) {
      writer.writeRequest(requestRecord({ id: `real-${i}`, state: "closed", status: 200 }));
    }
    const refused = requestRecord({ id: "refused", state: "closed", status: 429 });
    writer.writeRequest(refused, { expendable: true });
    assert.equal(writer.stats().pending, 3);
    assert.equal(writer.stats().dropped, 1, "the refused row is the one not kept");
    assert.equal(await writer.close(), true);
    for (let i = 0; i < 3; i++) assert.ok(await getRequest(db, `real-${i}`), `real-${i} is kept`);
    assert.equal(await getRequest(db, "refused"), null);
  });
});
