import assert from "node:assert/strict";
import { HistoryWriter } from "../db/history_writer.ts";
import { getRequest } from "../db/history_queries.ts";
import { REFUSED_ROWS_PER_MINUTE } from "../gateway/accept/refused_budget.ts";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import { manualTimers, requestRecord, withTempDb } from "./db_helpers.ts";
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
    // 46 refused rows over their own bound, then the two oldest left for five real ones.
    assert.equal(writer.stats().dropped, 46 + 2);
    assert.equal(await writer.close(), true);
    for (let i = 0; i < 8; i++) assert.ok(await getRequest(db, `real-${i}`), `real-${i} is kept`);
    assert.equal(await getRequest(db, "refused-47"), null);
    assert.ok(await getRequest(db, "refused-48"), "the newest refused rows still fit");
    assert.ok(await getRequest(db, "refused-49"));
  });
});
