import assert from "node:assert/strict";
import { getRequest } from "../db/history_queries.ts";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import { chatStream, headersNever } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { spawnGateway } from "./spawn_gateway.ts";

const messages = [{ role: "user", content: "hi" }];

Deno.test("shutdown lets requests finish within the grace period and aborts the rest, recorded", async () => {
  const up = startFakeUpstream();
  // Grace is 30 s, scaled to 300 ms: one answer takes ~150 ms, the other never comes.
  const gw = await startTestGateway(chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } }));
  try {
    up.enqueue(chatStream({ text: ["slow ", "but ", "done"] }, { gap: 30 }), headersNever);
    const finishing = postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    }, { "x-request-id": "finishing" });
    const stuck = postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      "x-request-id": "stuck",
    });
    for (let i = 0; i < 100 && gw.registry.size < 2; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    const started = Date.now();
    const stopping = gw.shutdown();
    const res = await finishing;
    assert.match(
      await res.text(),
      /slow [\s\S]*done/,
      "an in-flight stream finishes during the grace",
    );
    const late = await stuck;
    assert.equal(late.status, 503);
    assert.equal((await late.json()).error.code, "gw.gateway.shutting_down");
    await stopping;
    assert.ok(Date.now() - started >= 290, "the rest waited for the grace period");
    const again = await fetch(`${gw.url}/healthz`).catch(() => null);
    assert.equal(again, null, "no longer accepting");
  } finally {
    await gw.shutdown();
    await up.close();
  }
  // The history was flushed before shutdown resolved; read it from a fresh gateway on the same dir.
  const reopened = await startTestGateway(undefined, { dir: gw.dir });
  try {
    const stuck = await getRequest(reopened.db, "stuck");
    assert.equal(stuck?.state, "closed");
    assert.equal(stuck?.errorCode, "gw.gateway.shutting_down");
    assert.equal((await getRequest(reopened.db, "finishing"))?.status, 200);
  } finally {
    await reopened.stop();
  }
});

Deno.test("rows left open by a crash are closed as interrupted by the next start", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-crash-" });
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(chatRoute([up.url])));
  const { child, url } = await spawnGateway(dir, {
    env: { PULSEGATE_CONFIG: `${dir}/config.json`, PULSEGATE_TIME_SCALE: "0.01" },
  });
  const pending = postJson(`${url}/v1/chat/completions`, { model: "smart", messages }, {
    "x-request-id": "crashed",
  }).catch(() => null);
  while (up.calls.length === 0) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 150)); // let the open row reach the database
  child.kill("SIGKILL");
  await child.status;
  await pending; // the connection died with the process
  const gw = await startTestGateway(undefined, { dir });
  try {
    let row = await getRequest(gw.db, "crashed");
    for (let i = 0; i < 100 && row?.state !== "interrupted"; i++) {
      await new Promise((r) => setTimeout(r, 20));
      row = await getRequest(gw.db, "crashed");
    }
    assert.equal(row?.state, "interrupted");
    assert.equal(row?.errorCode, "gw.gateway.interrupted");
  } finally {
    await gw.stop();
    await up.close();
  }
});
