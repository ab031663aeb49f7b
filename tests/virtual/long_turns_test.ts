/**
 * A turn of very many parts (docs/security.md "Hostile input"): well inside the body's value
 * limit, it is read and translated like any other turn. Appending it with `push(...parts)`
 * overflowed V8's stack past about 120,000 parts: the Responses, Gemini and Interactions
 * clients got a 500, and a Chat request translated for an Anthropic upstream ended as
 * "could not reach upstream" without a call, charged to that upstream's cooldown, so a few such
 * requests from any key paused it for every key. A whole gateway in virtual time (it stays here,
 * not in tests/virtual/, because docs/security.md names this file).
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { chatWhole } from "../fake_upstreams/openai_chat_script.ts";
import { wholeBody } from "../fake_upstreams/anthropic_script.ts";
import { startVirtualGateway } from "../virtual_gateway.ts";

/** Parts in the long turn: past the stack's limit, under MAX_JSON_VALUES in every shape below. */
const PARTS = 190_000;
const typedText = Array.from({ length: PARTS }, () => ({ type: "text", text: "a" }));

function oneUpstream(kind: "openai-chat" | "anthropic", url: string): ConfigInput {
  return {
    failover: { retries_per_candidate: 0, failures_to_pause: 1 },
    upstreams: [{ id: "up", kind, base_url: url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
  };
}

const CLIENTS: { name: string; path: string; body: unknown }[] = [
  {
    name: "Responses: an assistant turn of many parts after another",
    path: "/v1/responses",
    body: {
      model: "smart",
      input: [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "output_text", text: "a" }] },
        {
          role: "assistant",
          content: Array.from({ length: PARTS }, () => ({ type: "output_text", text: "a" })),
        },
      ],
    },
  },
  {
    name: "Gemini: a user turn of many parts after another",
    path: "/v1beta/models/smart:generateContent",
    body: {
      contents: [
        { role: "user", parts: [{ text: "hi" }] },
        { role: "user", parts: Array.from({ length: PARTS }, () => ({ text: "a" })) },
      ],
    },
  },
  {
    name: "Interactions: a user step of many parts after a text",
    path: "/v1beta/interactions",
    body: {
      model: "smart",
      input: [{ type: "text", text: "hi" }, { type: "user_input", content: typedText }],
    },
  },
];

for (const client of CLIENTS) {
  Deno.test(`a long turn is read, not a 500: ${client.name}`, async () => {
    await using v = await startVirtualGateway({
      config: ([url]) => oneUpstream("openai-chat", `${url}/v1`),
    });
    const up = v.ups[0]!;
    up.setHandler(() => chatWhole({ text: ["ok"], usage: { input: 5, output: 1 } }));
    const got = await v.send(client.path, client.body, { headers: { "x-request-id": "long" } });
    assert.equal(got.status, 200, got.text.slice(0, 300));
    assert.equal(up.calls.length, 1);
    const { request } = await v.row("long");
    assert.equal(request.status, 200);
  });
}

Deno.test("a long turn translated for an Anthropic upstream reaches it, and nothing is charged", async () => {
  await using v = await startVirtualGateway({ config: ([url]) => oneUpstream("anthropic", url!) });
  const up = v.ups[0]!;
  up.setHandler(() => ({
    headers: { "content-type": "application/json" },
    body: [{ send: wholeBody({ text: ["ok"], usage: { input: 5, output: 1 } }) }],
  }));
  // Two user turns in a row: Anthropic takes one, so the translation joins them.
  const body = {
    model: "smart",
    messages: [{ role: "user", content: "hi" }, { role: "user", content: typedText }],
  };
  const got = await v.send("/v1/chat/completions", body, { headers: { "x-request-id": "joined" } });
  assert.equal(got.status, 200, got.text.slice(0, 300));
  assert.equal(up.calls.length, 1);
  const sent = up.calls[0]!.json as { messages: { content: unknown[] }[] };
  assert.equal(sent.messages.length, 1);
  assert.equal(sent.messages[0]!.content.length, PARTS + 1);
  const { attempts } = await v.row("joined");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [["up", "success"]]);
  const state = v.gw.cooldowns.get("up");
  assert.deepEqual([state.pausedUntil, state.consecutiveFailures], [null, 0]);
});
