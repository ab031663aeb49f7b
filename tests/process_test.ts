import assert from "node:assert/strict";
import OpenAI from "openai";
import { openDatabase } from "../db/client.ts";
import { spawnGateway } from "./spawn_gateway.ts";

Deno.test("the gateway serves with file reads limited to its data directory, and stops cleanly on SIGTERM", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-proc-" });
  const { child, url, log } = await spawnGateway(dir, { env: { PULSEGATE_TIME_SCALE: "0.01" } });
  try {
    assert.match(log, /SIMULATED/, "the demo profile says its upstreams are simulated");
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const whole = await client.chat.completions.create({
      model: "demo",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.match(whole.choices[0]?.message.content ?? "", /simulated healthy upstream/);
    const stream = await client.chat.completions.create({
      model: "demo",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.match(text, /Failover worked/);
    const admin = await fetch(`${url}/admin`);
    assert.equal(admin.status, 200);
    assert.match(await admin.text(), /SIMULATED/);
    const schema = await fetch(`${url}/admin/api/config/schema`);
    assert.equal(schema.status, 200);
    assert.equal((await schema.json()).type, "object");
  } finally {
    child.kill("SIGTERM");
  }
  const status = await child.status;
  assert.equal(status.code, 0, "SIGTERM exits 0");
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  try {
    const rows = await db.client.execute("SELECT state, status FROM requests");
    assert.equal(rows.rows.length, 2, "both requests were flushed before exit");
    assert.ok(rows.rows.every((r) => r.state === "closed" && r.status === 200));
  } finally {
    db.close();
  }
});
