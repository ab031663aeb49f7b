import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { eventually, postJson } from "./harness.ts";
import { spawnGateway } from "./spawn_gateway.ts";

/**
 * docs/scaling.md "Shared through libSQL": two gateway processes on one database file share a key's rpm
 * counter, at the real time scale (a read of the shared counters serves a process for 1 s).
 */

const KEY = { authorization: "Bearer sk-shared" };
const ASK = { model: "smart", messages: [{ role: "user", content: "q" }] };

async function start(dir: string, opts: { config?: string } = {}) {
  return await spawnGateway(dir, {
    env: {
      PULSEGATE_TIME_SCALE: "1",
      PULSEGATE_KEY_SHARED: "sk-shared",
      ...(opts.config ? { PULSEGATE_CONFIG: opts.config } : {}),
    },
  });
}

Deno.test("two gateway processes on one database share a key's rpm", async () => {
  await using up = startFakeUpstream({
    fallback: () => chatWhole({ text: ["hi"], usage: { input: 3, output: 2 } }),
  });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-key-limits-" });
  const config = `${dir}/config.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
      keys: [{ id: "shared", key_env: "PULSEGATE_KEY_SHARED", rpm: 2 }],
    }),
  );
  const a = await start(dir, { config });
  const b = await start(dir); // runs the config A stored
  const db = await openDatabase(`file:${dir}/pulsegate.db`, { busyTimeoutMs: 5_000 });
  try {
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${a.url}/v1/chat/completions`, ASK, KEY);
      assert.equal(res.status, 200);
      await res.body?.cancel();
    }
    // A writes its counts in the background, within milliseconds; B reads them at its first
    // request for the key.
    await eventually(async () => {
      const rows = await db.client.execute(
        "SELECT SUM(requests) AS n FROM key_usage WHERE key_id = 'shared' AND kind = 'second'",
      );
      return Number(rows.rows[0]?.n ?? 0) === 2;
    }, { what: "A's two requests counted in the database" });
    const refused = await postJson(`${b.url}/v1/chat/completions`, ASK, KEY);
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get("x-pulsegate-error-code"), "gw.key.rate_limited");
    const retry = Number(refused.headers.get("retry-after"));
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    assert.equal((await refused.json()).error.code, "gw.key.rate_limited");
    assert.equal(up.calls.length, 2, "the refused request never reached the upstream");
  } finally {
    db.close();
    for (const gw of [a, b]) {
      gw.child.kill("SIGTERM");
      await gw.child.status;
    }
    await Deno.remove(dir, { recursive: true });
  }
});
