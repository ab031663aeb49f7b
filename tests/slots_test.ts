/** Slots (`max_in_flight`): waiting for one, giving one up. */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, postJson, startTestGateway } from "./harness.ts";
import {
  chatStream,
  chatStreamHeld,
  chatWhole,
  silentAfterHeaders,
} from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

// TEST_SCALE 0.01: idle timeout 300 ms, opening hold 150 ms, keep-alive every 150 ms.
const failover = { idle_timeout_secs: 30 };
const good = { text: ["good ", "answer"], usage: { input: 5, output: 2 } };
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });

Deno.test("time waiting for a slot does not count towards the idle timeout", async () => {
  const up = startFakeUpstream();
  const config: ConfigInput = {
    // A 600 ms window, 300 s (3 s) of slot wait.
    failover: { idle_timeout_secs: 60, slot_wait_secs: 300 },
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url, max_in_flight: 1 }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
  };
  const gw = await startTestGateway(config);
  try {
    // A holds the only slot for ~800 ms (8 gaps of 100 ms, each 6x under the window); B then
    // needs 150 ms (4x under) before its first content.
    up.enqueue(chatStream({ text: ["a", "b", "c", "d", "e", "f"] }, { gap: 100 }));
    up.enqueue({ ...chatStream(good), headerDelay: 150 });
    const a = postJson(`${gw.url}/v1/chat/completions`, chat(true));
    await eventually(() => gw.slots.inFlight("up1") === 1);
    const b = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    const text = await b.text();
    assert.match(text, /good /, "950 ms in total, but only 150 ms of it after sending");
    await (await a).text();
    const { attempts } = await gw.row(b.headers.get("x-request-id")!);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0]!.outcome, "success");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a slot given up on is free at once", async () => {
  const up = startFakeUpstream();
  const config: ConfigInput = {
    // B may wait 3 s for the slot A's 300 ms timeout frees: 10x.
    failover: { ...failover, slot_wait_secs: 300 },
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url, max_in_flight: 1 }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
  };
  const gw = await startTestGateway(config);
  try {
    up.enqueue(silentAfterHeaders, chatStream(good));
    const started = Date.now();
    const a = postJson(`${gw.url}/v1/chat/completions`, chat(false));
    await eventually(() => gw.slots.inFlight("up1") === 1);
    const b = postJson(`${gw.url}/v1/chat/completions`, chat(true));
    const first = await a;
    const aEnded = Date.now();
    assert.equal(first.status, 504);
    await first.body?.cancel();
    assert.match(await (await b).text(), /good /);
    const waited = (await up.calls[1]!.closed, Date.now()) - started;
    assert.ok(waited >= 290, "B waited for A's slot");
    assert.ok(up.calls.length === 2);
    assert.ok(aEnded - started < 1500, "A ended at its idle timeout, not later");
    assert.equal(gw.slots.inFlight("up1"), 0);
    assert.equal(gw.metrics.inflight, 0);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("fair share: one key's queue of streams does not lock another key out of a full upstream", async () => {
  const up = startFakeUpstream();
  const config: ConfigInput = {
    // Streams held by the test (30 s idle window); 3 s of slot wait.
    failover: { idle_timeout_secs: 3000, slot_wait_secs: 300 },
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url, max_in_flight: 2 }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    keys: [
      { id: "a", key_env: "PULSEGATE_KEY_A" },
      { id: "b", key_env: "PULSEGATE_KEY_B" },
    ],
  };
  const gw = await startTestGateway(config, {
    env: { PULSEGATE_KEY_A: "sk-a", PULSEGATE_KEY_B: "sk-b" },
  });
  const gates = new Map(["A1", "A2", "A3", "A4"].map((n) => [n, Promise.withResolvers<void>()]));
  const asked = (call: { json: unknown }) =>
    (call.json as { messages: { content: string }[] }).messages[0]!.content;
  up.setHandler((call) => {
    const gate = gates.get(asked(call));
    return gate ? chatStreamHeld({ text: ["a"] }, gate.promise) : chatWhole({ text: ["b"] });
  });
  const send = (key: string, content: string, stream: boolean) =>
    postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream,
      messages: [{ role: "user", content }],
    }, { authorization: `Bearer ${key}` });
  const waiting = () => gw.registry.all().filter((l) => l.state === "waiting_for_slot").length;
  try {
    // Key a holds both slots with streams and has two more waiting for one.
    const held = [await send("sk-a", "A1", true), await send("sk-a", "A2", true)];
    assert.equal(gw.slots.heldBy("up1", "a"), 2);
    const queued = [send("sk-a", "A3", true), send("sk-a", "A4", true)];
    await eventually(() => waiting() === 2, { what: "A3 and A4 waiting" });
    const b = send("sk-b", "B", false);
    await eventually(() => waiting() === 3, { what: "B waiting behind them" });

    // The first slot to free goes to key b, which holds none, not to key a's next in line.
    gates.get("A1")!.resolve();
    await held[0]!.text();
    const answer = await b;
    assert.equal(answer.status, 200, await answer.clone().text());
    assert.equal((await answer.json()).choices[0].message.content, "b");
    assert.deepEqual(up.calls.map(asked).slice(0, 3), ["A1", "A2", "B"]);

    for (const gate of gates.values()) gate.resolve();
    for (const res of [held[1]!, ...(await Promise.all(queued))]) {
      assert.equal(res.status, 200);
      assert.match(await res.text(), /\[DONE\]/);
    }
    await eventually(() => gw.metrics.inflight === 0, { what: "every request ended" });
    assert.equal(gw.slots.inFlight("up1"), 0);
    assert.equal(gw.slots.heldBy("up1", "a"), 0);
    assert.equal(gw.slots.heldBy("up1", "b"), 0);
    assert.equal(gw.metrics.keyInFlight.get({ key: "a" }), 0);
    assert.equal(gw.metrics.keyInFlight.get({ key: "b" }), 0);
  } finally {
    await gw.stop();
    await up.close();
  }
});
