import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { getRequest } from "../db/history_queries.ts";
import { chatRoute, eventually, postJson, startTestGateway } from "./harness.ts";
import { chatStreamHeld, headersNever } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { spawnGateway } from "./spawn_gateway.ts";

const messages = [{ role: "user", content: "hi" }];

Deno.test("shutdown lets requests finish within the grace period and aborts the rest, recorded", async () => {
  const up = startFakeUpstream();
  // Grace is 30 s, scaled to 300 ms. One answer is held mid-stream until shutdown has begun and
  // then ends at once, far inside the grace however loaded the machine; the other never comes.
  const gw = await startTestGateway(chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } }));
  const release = Promise.withResolvers<void>();
  try {
    up.enqueue(
      chatStreamHeld({ text: ["slow ", "but ", "done"] }, release.promise),
      headersNever,
    );
    const finishing = postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    }, { "x-request-id": "finishing" });
    const stuck = postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      "x-request-id": "stuck",
    });
    await eventually(() => gw.registry.size === 2 && up.calls.length === 2);
    const started = Date.now();
    const stopping = gw.shutdown();
    release.resolve();
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
    release.resolve();
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
  await eventually(() => up.calls.length === 1);
  // Kill only once the open row is in the database (WAL lets this second reader in), rather
  // than after a fixed wait.
  const reader = await openDatabase(`file:${dir}/pulsegate.db`);
  try {
    await eventually(async () => (await getRequest(reader, "crashed"))?.state === "open");
  } finally {
    reader.close();
  }
  child.kill("SIGKILL");
  await child.status;
  await pending; // the connection died with the process
  const gw = await startTestGateway(undefined, { dir });
  try {
    // The dead instance is stale after three missed heartbeats (300 ms scaled).
    await eventually(async () => (await getRequest(gw.db, "crashed"))?.state === "interrupted");
    const row = await getRequest(gw.db, "crashed");
    assert.equal(row?.state, "interrupted");
    assert.equal(row?.errorCode, "gw.gateway.interrupted");
  } finally {
    await gw.stop();
    await up.close();
  }
});
