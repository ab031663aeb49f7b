import assert from "node:assert/strict";
import { getRequest } from "../db/history_queries.ts";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import { lockDatabase } from "./db_helpers.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

Deno.test("with the database locked, requests still succeed and their rows land once it frees", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const gw = await startTestGateway(chatRoute([up.url]), { historyWorker: true });
  try {
    const lock = await lockDatabase(`file:${gw.dir}/pulsegate.db`);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, {
        model: "smart",
        messages: [{ role: "user", content: `hi ${i}` }],
      });
      assert.equal(res.status, 200, "a locked database never fails a request");
      assert.equal((await res.json()).choices[0].message.content, "ok");
      ids.push(res.headers.get("x-request-id")!);
    }
    assert.equal(await gw.writer.flush(), false, "the write fails while the lock is held");
    assert.ok(gw.writer.stats().pending >= 5);
    await lock.release();
    for (const id of ids) {
      const { request, attempts } = await gw.row(id);
      assert.equal(request.status, 200);
      assert.equal(attempts.length, 1);
    }
    assert.equal(gw.writer.stats().dropped, 0);
    assert.ok(await getRequest(gw.db, ids[0]!));
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("rows still queued when the database is away at shutdown are counted and logged once", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const gw = await startTestGateway(chatRoute([up.url]), { historyWorker: true });
  const lock = await lockDatabase(`file:${gw.dir}/pulsegate.db`);
  const events: Array<{ name: string; fields: Record<string, unknown> }> = [];
  gw.log.event = (name, fields = {}) => void events.push({ name, fields });
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.equal(gw.metrics.historyDropped.get(), 0);
    await gw.stop();
    // One request row and its one hop, neither written.
    assert.equal(gw.metrics.historyDropped.get(), 2);
    assert.equal(gw.writer.stats().dropped, 2);
    assert.equal(gw.writer.stats().pending, 0);
    const lost = events.filter((e) => e.name === "history.rows_lost_at_shutdown");
    assert.deepEqual(lost.map((e) => e.fields), [{ rows: 2 }]);
    assert.match(gw.metrics.render(), /^pulsegate_history_dropped_rows_total 2$/m);
  } finally {
    await lock.release();
    await up.close();
  }
});

Deno.test("while every history write fails, /readyz, the admin page and its health panel say so", async () => {
  const up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }),
  });
  const gw = await startTestGateway(chatRoute([up.url]), { historyWorker: true });
  const lock = await lockDatabase(`file:${gw.dir}/pulsegate.db`);
  let locked = true;
  const readyz = async () => {
    const res = await fetch(`${gw.url}/readyz`);
    return { status: res.status, body: await res.json() as Record<string, unknown> };
  };
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(res.status, 200, "serving goes on");
    await res.body?.cancel();
    assert.equal(await gw.writer.flush(), false);
    const ready = await readyz();
    assert.equal(ready.status, 200, "this instance can still serve: it stays in the balancer");
    assert.equal(ready.body.ok, false);
    assert.equal(ready.body.serving, true);
    assert.match(String(ready.body.reason), /^history writes failing since \S+: .*locked/);
    assert.match(String(ready.body.history), /2 rows kept in memory \(at most 100000/);
    const page = await (await fetch(`${gw.url}/admin`)).text();
    assert.match(
      page,
      /role="alert">History is not being saved to a database: history writes fail/,
    );
    const health = await (await fetch(`${gw.url}/admin/api/health`)).json();
    assert.match(String(health.history), /^history writes failing since /);

    await lock.release();
    locked = false;
    assert.equal(await gw.writer.flush(), true);
    assert.deepEqual(await readyz(), { status: 200, body: { ok: true } });
    assert.equal((await (await fetch(`${gw.url}/admin/api/health`)).json()).history, null);
  } finally {
    if (locked) await lock.release();
    await gw.stop();
    await up.close();
  }
});
