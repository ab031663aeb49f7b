import assert from "node:assert/strict";
import { openDatabase } from "../db/client.ts";
import { getRequest, listAttempts } from "../db/history_queries.ts";
import { chatRoute, eventually, postJson, startTestGateway } from "./harness.ts";
import { lockDatabase } from "./db_helpers.ts";
import { chatStreamHeld, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { spawnGateway } from "./spawn_gateway.ts";

const messages = [{ role: "user", content: "hi" }];

/**
 * docs/design.md "History" and docs/scaling.md "Durability of a local file": a process that dies
 * while a batch of rows cannot commit loses those rows' last versions, but no row stays open: the
 * next start closes the row it had written as open, and its hop, as `interrupted`. What was
 * committed before the crash is intact (the WAL holds it, whatever `synchronous=NORMAL` skips).
 */
Deno.test("a crash while a batch cannot commit leaves its rows closed as interrupted, and loses no commit", async () => {
  const up = startFakeUpstream();
  const release = Promise.withResolvers<void>();
  up.enqueue(
    chatWhole({ text: ["done"], usage: { input: 7, output: 3 } }),
    chatStreamHeld({ text: ["slow ", "answer"] }, release.promise),
  );
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-crash-batch-" });
  await Deno.writeTextFile(
    `${dir}/config.json`,
    JSON.stringify(chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } })),
  );
  const url = `file:${dir}/pulsegate.db`;
  const { child, url: gatewayUrl } = await spawnGateway(dir, {
    env: { PULSEGATE_CONFIG: `${dir}/config.json`, PULSEGATE_TIME_SCALE: "0.01" },
  });
  const reader = await openDatabase(url);
  let killed = false;
  try {
    const done = await postJson(`${gatewayUrl}/v1/chat/completions`, { model: "smart", messages }, {
      "x-request-id": "done",
    });
    assert.equal(done.status, 200);
    await done.body?.cancel();
    await eventually(async () => (await getRequest(reader, "done"))?.state === "closed", {
      what: "the finished request committed",
    });
    const committed = await getRequest(reader, "done");

    const held = postJson(`${gatewayUrl}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    }, { "x-request-id": "held" });
    // Its open row and its hop land once they have run past the deferral (10 ms scaled).
    await eventually(async () =>
      (await getRequest(reader, "held"))?.state === "open" &&
      (await listAttempts(reader, "held")).length === 1, { what: "the open rows" });

    const lock = await lockDatabase(url);
    try {
      release.resolve();
      const answer = await held;
      assert.match(await answer.text(), /slow [\s\S]*answer/, "the client got its whole answer");
      // The batch closing it was tried and refused: it waits in memory when the process dies.
      await eventually(async () => {
        const ready = await (await fetch(`${gatewayUrl}/readyz`)).json();
        return /history writes failing/.test(String(ready.history ?? ""));
      }, { what: "a refused history batch" });
      child.kill("SIGKILL");
      killed = true;
      await child.status;
    } finally {
      await lock.release();
    }
    assert.equal((await getRequest(reader, "held"))?.state, "open", "its closed row never landed");
    reader.close();

    const gw = await startTestGateway(undefined, { dir });
    try {
      // The dead instance is stale after three missed heartbeats (300 ms scaled).
      await eventually(async () => (await getRequest(gw.db, "held"))?.state === "interrupted", {
        what: "the open row closed as interrupted",
      });
      const row = await getRequest(gw.db, "held");
      assert.equal(row?.errorCode, "gw.gateway.interrupted");
      assert.equal(row?.outcome, "error");
      const [hop] = await listAttempts(gw.db, "held");
      assert.equal(hop?.outcome, "error");
      assert.equal(hop?.errorCode, "gw.gateway.interrupted");
      assert.deepEqual(await getRequest(gw.db, "done"), committed, "a commit survives the crash");
      assert.equal(committed?.outputTokens, 3);
    } finally {
      await gw.stop();
    }
  } finally {
    release.resolve();
    if (!killed) {
      child.kill("SIGKILL");
      await child.status;
    }
    if (!reader.client.closed) reader.close();
    await up.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});
