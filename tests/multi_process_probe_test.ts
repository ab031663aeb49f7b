import assert from "node:assert/strict";
import type { HealthView } from "../admin/api_types.ts";
import { eventually, postJson } from "./harness.ts";
import { chatError, chatWholeBody } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";
import { spawnGateway } from "./spawn_gateway.ts";

/**
 * docs/design.md "Cooldown", docs/scaling.md "Shared through libSQL": two `main.ts` processes on one
 * database file. An upstream paused through one process is, when its pause ends, probed by
 * exactly one request of the two processes (the probe is claimed in libSQL); the others go to
 * the next candidate. Scale 0.05: a heartbeat lasts 0.5 s, the 30 s pause 1.5 s.
 */
const ADMIN = { authorization: "Bearer probe-admin" };
const body = { model: "smart", messages: [{ role: "user", content: "hi" }] };

async function stateOf(gateway: string): Promise<string | undefined> {
  const res = await fetch(`${gateway}/admin/api/health`, { headers: ADMIN });
  const view = await res.json() as HealthView;
  return view.upstreams.find((u) => u.id === "up1")?.state;
}

Deno.test("two processes on one database: one probe reaches an upstream whose pause ended", async () => {
  let failing = true;
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const recovering = startFakeUpstream({
    fallback: () =>
      failing
        ? chatError(503, "down")
        : { body: [{ until: held }, { send: chatWholeBody({ text: ["back"] }) }] },
  });
  const healthy = startFakeUpstream({
    fallback: () => ({ body: [{ send: chatWholeBody({ text: ["fallback"] }) }] }),
  });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-probe-" });
  await Deno.writeTextFile(
    `${dir}/config.json`,
    JSON.stringify({
      failover: { pause_secs: 30, idle_timeout_secs: 3600, retries_per_candidate: 0 },
      upstreams: [
        { id: "up1", kind: "openai-chat", base_url: recovering.url },
        { id: "up2", kind: "openai-chat", base_url: healthy.url },
      ],
      routes: [{
        model: "smart",
        candidates: [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }],
      }],
    }),
  );
  const env = { PULSEGATE_TIME_SCALE: "0.05", PULSEGATE_ADMIN_TOKEN: "probe-admin" };
  const a = await spawnGateway(dir, { env: { ...env, PULSEGATE_CONFIG: `${dir}/config.json` } });
  const b = await spawnGateway(dir, { env });
  try {
    // Three failures through A pause up1 (failures_to_pause 3); B reads the pause at its beat.
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${a.url}/v1/chat/completions`, body);
      assert.equal(res.status, 200);
      await res.body?.cancel();
    }
    assert.equal(recovering.calls.length, 3);
    await eventually(async () => await stateOf(b.url) === "paused", { what: "B sees the pause" });
    failing = false;
    await eventually(
      async () => await stateOf(a.url) === "probing" && await stateOf(b.url) === "probing",
      { what: "the pause ends on both" },
    );
    const sent = [a, b].flatMap((gw) =>
      Array.from({ length: 5 }, () => postJson(`${gw.url}/v1/chat/completions`, body))
    );
    await eventually(() => healthy.calls.length === 3 + 9, { what: "nine requests went on" });
    assert.equal(recovering.calls.length, 3 + 1, "one probe, from one of the two processes");
    release();
    for (const res of await Promise.all(sent)) {
      assert.equal(res.status, 200);
      await res.body?.cancel();
    }
    assert.equal(recovering.calls.length, 4);
    await eventually(async () => await stateOf(a.url) === "ok" && await stateOf(b.url) === "ok", {
      what: "both see it closed",
    });
  } finally {
    release();
    a.child.kill("SIGTERM");
    b.child.kill("SIGTERM");
    await Promise.all([a.child.status, b.child.status, recovering.close(), healthy.close()]);
    await Deno.remove(dir, { recursive: true });
  }
});
