/**
 * Slots (`max_in_flight`): waiting for one (`slot_wait_secs`, 30 s by default), giving one up,
 * sharing them fairly between keys. A whole gateway in virtual time: each wait is asserted at its
 * exact instant.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway } from "../virtual_gateway.ts";
import {
  chatStream,
  chatStreamHeld,
  chatWhole,
  silentAfterHeaders,
} from "../fake_upstreams/openai_chat_script.ts";

const good = { text: ["good ", "answer"], usage: { input: 5, output: 2 } };
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });
const CHAT = "/v1/chat/completions";

function oneSlot(failover: ConfigInput["failover"] = {}) {
  return ([url]: string[]): ConfigInput => ({
    failover,
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: url!, max_in_flight: 1 }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
  });
}

Deno.test("slot_wait_secs 30: a request waits 30 s for a full upstream's slot, then 429; not at 29.999 s", async () => {
  await using v = await startVirtualGateway({ config: oneSlot() });
  const release = Promise.withResolvers<void>();
  v.ups[0]!.setHandler(() => chatStreamHeld(good, release.promise));
  await v.run((async () => {
    const held = v.exchange(CHAT, chat(true));
    await v.until(() => v.gw.slots.inFlight("up1") === 1, "the slot taken");
    const refused = await v.exchange(CHAT, chat(false));
    assert.equal(refused.status, 429);
    assert.equal(refused.headersAt, 30_000, "given up on at 30 s exactly");
    assert.equal(JSON.parse(refused.text).error.code, "gw.slots.full");
    release.resolve();
    await held;
  })());
  // A slot freed 29.999 s into the wait is taken.
  const again = Promise.withResolvers<void>();
  v.ups[0]!.setHandler(() => chatStreamHeld(good, again.promise));
  await v.run((async () => {
    const held = v.exchange(CHAT, chat(true));
    await v.until(() => v.gw.slots.inFlight("up1") === 1, "the slot taken");
    v.clock.after(29_999, () => again.resolve());
    v.ups[0]!.setHandler(() => chatWhole(good));
    const waited = await v.exchange(CHAT, chat(false));
    assert.equal(waited.status, 200);
    assert.equal(waited.headersAt, 29_999);
    await held;
  })());
});

Deno.test("time waiting for a slot does not count towards the idle timeout", async () => {
  await using v = await startVirtualGateway({
    config: oneSlot({ slot_wait_secs: 300 }),
  });
  const up = v.ups[0]!;
  // A holds the only slot for 250 s (six blocks 50 s apart); B then needs 100 s before its
  // first content: 350 s after it was sent, past the 300 s idle timeout, but 100 s after its hop.
  up.enqueue(chatStream({ text: ["a", "b", "c"] }, { gap: 50_000 }));
  up.enqueue({ ...chatStream(good), headerDelay: 100_000 });
  let sentB = 0;
  const b = await v.run((async () => {
    const a = v.exchange(CHAT, chat(true));
    await v.until(() => v.gw.slots.inFlight("up1") === 1, "A holds the slot");
    sentB = v.clock.sinceStart;
    const b = await v.exchange(CHAT, chat(true));
    await a;
    return b;
  })());
  assert.match(b.text, /good /);
  assert.doesNotMatch(b.text, /idle_timeout/);
  const content = b.pieces.find((p) => p.text.includes("good "))!;
  assert.equal(sentB + content.at, 350_000, "A's 250 s, then B's 100 s");
  const { attempts } = await v.row(b.headers.get("x-request-id")!);
  assert.equal(attempts.length, 1);
  assert.equal(attempts[0]!.outcome, "success");
});

Deno.test("a slot given up on is free at once", async () => {
  await using v = await startVirtualGateway({
    config: oneSlot({ slot_wait_secs: 300, idle_timeout_secs: 200 }),
  });
  const up = v.ups[0]!;
  up.enqueue(silentAfterHeaders, chatStream(good));
  let sentB = 0;
  const [first, second] = await v.run((async () => {
    const a = v.exchange(CHAT, chat(false));
    await v.until(() => v.gw.slots.inFlight("up1") === 1, "A holds the slot");
    sentB = v.clock.sinceStart;
    const b = v.exchange(CHAT, chat(true));
    return await Promise.all([a, b]);
  })());
  assert.equal(first.status, 504);
  assert.equal(first.headersAt, 200_000, "A ended at its idle timeout");
  assert.match(second.text, /good /);
  assert.equal(
    sentB + second.pieces.find((p) => p.text.includes("good "))!.at,
    200_000,
    "B took A's slot the instant it was freed",
  );
  assert.equal(up.calls.length, 2);
  assert.equal(v.gw.slots.inFlight("up1"), 0);
  assert.equal(v.gw.metrics.inflight, 0);
});

Deno.test("fair share: one key's queue of streams does not lock another key out of a full upstream", async () => {
  await using v = await startVirtualGateway({
    env: { PULSEGATE_KEY_A: "sk-a", PULSEGATE_KEY_B: "sk-b" },
    config: ([url]) => ({
      failover: { idle_timeout_secs: 3600, slot_wait_secs: 300 },
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: url!, max_in_flight: 2 }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
      keys: [
        { id: "a", key_env: "PULSEGATE_KEY_A" },
        { id: "b", key_env: "PULSEGATE_KEY_B" },
      ],
    }),
  });
  const { gw } = v;
  const up = v.ups[0]!;
  const gates = new Map(["A1", "A2", "A3", "A4"].map((n) => [n, Promise.withResolvers<void>()]));
  const asked = (call: { json: unknown }) =>
    (call.json as { messages: { content: string }[] }).messages[0]!.content;
  up.setHandler((call) => {
    const gate = gates.get(asked(call));
    return gate ? chatStreamHeld({ text: ["a"] }, gate.promise) : chatWhole({ text: ["b"] });
  });
  const send = (key: string, content: string, stream: boolean) =>
    v.exchange(CHAT, { model: "smart", stream, messages: [{ role: "user", content }] }, {
      headers: { authorization: `Bearer ${key}` },
    });
  const waiting = () => gw.registry.all().filter((l) => l.state === "waiting_for_slot").length;
  await v.run((async () => {
    // Key a holds both slots with streams and has two more waiting for one.
    const held = [send("sk-a", "A1", true), send("sk-a", "A2", true)];
    await v.until(() => gw.slots.heldBy("up1", "a") === 2, "a holds both slots");
    const queued = [send("sk-a", "A3", true), send("sk-a", "A4", true)];
    await v.until(() => waiting() === 2, "A3 and A4 waiting");
    const b = send("sk-b", "B", false);
    await v.until(() => waiting() === 3, "B waiting behind them");

    // The first slot to free goes to key b, which holds none, not to key a's next in line.
    gates.get("A1")!.resolve();
    await held[0];
    const answer = await b;
    assert.equal(answer.status, 200, answer.text);
    assert.equal(JSON.parse(answer.text).choices[0].message.content, "b");
    assert.deepEqual(up.calls.map(asked).slice(0, 3), ["A1", "A2", "B"]);

    for (const gate of gates.values()) gate.resolve();
    for (const res of await Promise.all([held[1]!, ...queued])) {
      assert.equal(res.status, 200);
      assert.match(res.text, /\[DONE\]/);
    }
    await v.until(() => gw.metrics.inflight === 0, "every request ended");
  })());
  assert.equal(gw.slots.inFlight("up1"), 0);
  assert.equal(gw.slots.heldBy("up1", "a"), 0);
  assert.equal(gw.slots.heldBy("up1", "b"), 0);
  assert.equal(gw.metrics.keyInFlight.get({ key: "a" }), 0);
  assert.equal(gw.metrics.keyInFlight.get({ key: "b" }), 0);
});
