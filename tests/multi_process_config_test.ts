import assert from "node:assert/strict";
import { HEARTBEAT_MS } from "../gateway/start/instance_heartbeat.ts";
import { postJson } from "./harness.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { spawnGateway } from "./spawn_gateway.ts";

/**
 * docs/scaling.md: a config saved through the admin API of one process is in force on every
 * process sharing the database within one heartbeat. Two `main.ts` processes on one database file;
 * the time scale makes a heartbeat last 1 s.
 */
const SCALE = 0.1;
const BEAT_MS = HEARTBEAT_MS * SCALE;
const ADMIN = { authorization: "Bearer config-admin", "content-type": "application/json" };

function configTo(upstream: "old" | "new", urls: { old: string; new: string }) {
  return {
    upstreams: [
      { id: "old", kind: "openai-chat", base_url: urls.old },
      { id: "new", kind: "openai-chat", base_url: urls.new },
    ],
    routes: [{ model: "smart", candidates: [{ upstream, model: "m" }] }],
  };
}

/** Which upstream answered a chat request sent to `gateway`. */
async function answeredBy(gateway: string): Promise<string> {
  const res = await postJson(`${gateway}/v1/chat/completions`, {
    model: "smart",
    messages: [{ role: "user", content: "who?" }],
  });
  assert.equal(res.status, 200);
  const body = await res.json() as { choices: { message: { content: string } }[] };
  return body.choices[0]?.message.content ?? "";
}

async function configView(gateway: string) {
  const res = await fetch(`${gateway}/admin/api/config`, { headers: ADMIN });
  assert.equal(res.status, 200);
  return await res.json() as {
    version: number | null;
    runningVersion: number | null;
    config: ReturnType<typeof configTo>;
  };
}

Deno.test("a config saved at one process routes on the other within one heartbeat", async () => {
  const oldUp = startFakeUpstream({ fallback: () => chatWhole({ text: ["old"] }) });
  const newUp = startFakeUpstream({ fallback: () => chatWhole({ text: ["new"] }) });
  const urls = { old: oldUp.url, new: newUp.url };
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-config-" });
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(configTo("old", urls)));
  const env = { PULSEGATE_TIME_SCALE: String(SCALE), PULSEGATE_ADMIN_TOKEN: "config-admin" };
  const a = await spawnGateway(dir, { env: { ...env, PULSEGATE_CONFIG: `${dir}/config.json` } });
  const b = await spawnGateway(dir, { env }); // runs what A stored
  try {
    assert.equal(await answeredBy(b.url), "old");
    assert.equal((await configView(b.url)).runningVersion, 1);

    const saved = await fetch(`${a.url}/admin/api/config`, {
      method: "PUT",
      headers: ADMIN,
      body: JSON.stringify(configTo("new", urls)),
    });
    assert.equal(saved.status, 200);
    await saved.body?.cancel();
    const savedAt = Date.now();
    assert.equal(await answeredBy(a.url), "new", "in force at once where it was saved");

    let seenAt = 0;
    while (!seenAt) {
      if (await answeredBy(b.url) === "new") seenAt = Date.now();
      else if (Date.now() - savedAt > 10 * BEAT_MS) assert.fail("B never took the new config");
      else await new Promise((r) => setTimeout(r, 20));
    }
    // Within three beats; a process that read the config only at start would never switch.
    assert.ok(seenAt - savedAt < 3 * BEAT_MS, `B switched after ${seenAt - savedAt} ms`);

    const view = await configView(b.url);
    assert.equal(view.version, 2);
    assert.equal(view.runningVersion, 2, "B's admin API shows it runs the new version");
    assert.equal(view.config.routes[0]?.candidates[0]?.upstream, "new");
  } finally {
    a.child.kill("SIGTERM");
    b.child.kill("SIGTERM");
    await Promise.all([a.child.status, b.child.status, oldUp.close(), newUp.close()]);
    await Deno.remove(dir, { recursive: true });
  }
  assert.equal((await a.child.status).code, 0, "A stops cleanly");
  assert.equal((await b.child.status).code, 0, "B stops cleanly");
});
