/**
 * The idle timer at its real default (docs/design.md "Pulse", 300 s): what restarts it (content)
 * and what never does (keep-alives, a slow reader), in each client format. A whole gateway in
 * virtual time (tests/virtual_gateway.ts): each ending is asserted at its exact instant.
 */
import assert from "node:assert/strict";
import { startVirtualGateway } from "../virtual_gateway.ts";
import {
  chatStream,
  contentThenSilence,
  keepAlivesOnly,
} from "../fake_upstreams/openai_chat_script.ts";
import { bedrockEvent } from "../fake_upstreams/bedrock_script.ts";

const IDLE_MS = 300_000;
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });

/** Content then silence, as each client format sees the ending. */
const ENDINGS: Array<[string, string, unknown, RegExp]> = [
  ["openai-chat", "/v1/chat/completions", chat(true), /data: \{"error":.*idle_timeout_mid_stream/],
  [
    "openai-responses",
    "/v1/responses",
    { model: "smart", stream: true, input: "hi" },
    /event: response\.failed[\s\S]*idle_timeout_mid_stream/,
  ],
  [
    "anthropic",
    "/v1/messages",
    { model: "smart", stream: true, max_tokens: 9, messages },
    /event: error[\s\S]*idle_timeout_mid_stream/,
  ],
  ["gemini", "/v1beta/models/smart:streamGenerateContent?alt=sse", {
    contents: [{ role: "user", parts: [{ text: "hi" }] }],
  }, /\n\n\{"error":[^\n]*idle_timeout_mid_stream"[^\n]*\}\n\ndata: \{"error":[^\n]*\}\n\n$/],
];

for (const [format, path, body, ending] of ENDINGS) {
  Deno.test(`${format}: content then silence ends with the client's error event at 300 s`, async () => {
    await using v = await startVirtualGateway();
    v.ups[0]!.setHandler(() => contentThenSilence("partial answer"));
    const got = await v.send(path, body);
    assert.equal(got.status, 200);
    assert.match(got.text, /partial answer/);
    assert.match(got.text, ending);
    assert.equal(got.pieces.find((p) => p.text.includes("partial answer"))?.at, 0);
    assert.equal(got.endedAt, IDLE_MS, "ended at 300 s of silence exactly");
    assert.ok(
      got.pieces.every((p) => p.at === 0 || p.at === IDLE_MS),
      "nothing between the content and the timeout",
    );
    assert.equal(v.gw.cooldowns.isPaused("up1"), false);
  });
}

Deno.test("bedrock messageStart alone still times out, at 300 s", async () => {
  await using v = await startVirtualGateway({
    env: { AK: "a", SK: "b" },
    config: ([url]) => ({
      upstreams: [{
        id: "br",
        kind: "bedrock",
        base_url: url!,
        region: "us-east-1",
        access_key_env: "AK",
        secret_key_env: "SK",
      }],
      routes: [{ model: "smart", candidates: [{ upstream: "br", model: "m" }] }],
    }),
  });
  v.ups[0]!.setHandler(() => ({
    headers: { "content-type": "application/vnd.amazon.eventstream" },
    body: [{ send: bedrockEvent("messageStart", { role: "assistant" }) }, { hang: true }],
  }));
  const got = await v.send("/v1/chat/completions", chat(true));
  assert.match(got.text, /gw\.upstream\.idle_timeout"/);
  assert.equal(got.endedAt, IDLE_MS);
  const { attempts } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(attempts[0]!.outcome, "idle_timeout");
});

Deno.test("chat keep-alives alone still time out at 300 s, though one came every 10 s", async () => {
  await using v = await startVirtualGateway();
  v.ups[0]!.setHandler(() => keepAlivesOnly(10_000));
  const got = await v.send("/v1/chat/completions", chat(true));
  assert.match(got.text, /gw\.upstream\.idle_timeout"/);
  assert.equal(got.endedAt, IDLE_MS);
  assert.doesNotMatch(got.text, /: ping/, "the upstream's pings are not passed on");
});

Deno.test("a client slow to read a fast answer is not taken for upstream silence", async () => {
  await using v = await startVirtualGateway();
  // Forty 256 KiB pieces at once; the client reads one piece each 30 s (20 minutes in all), so
  // the gateway's writes wait on the client far longer than the idle window.
  const big = "x".repeat(256 * 1024);
  v.ups[0]!.enqueue(chatStream({ text: ["Hi", ...Array(40).fill(big)] }));
  let upstreamEnded = -1;
  const got = await v.run((async () => {
    const sent = v.exchange("/v1/chat/completions", chat(true), { readGapMs: 30_000 });
    await v.until(() => v.ups[0]!.calls.length === 1, "the upstream called");
    void v.ups[0]!.calls[0]!.closed.then(() => (upstreamEnded = v.clock.sinceStart));
    return await sent;
  })());
  assert.equal(got.status, 200);
  assert.ok(got.text.length > 40 * 256 * 1024, `all ${got.text.length} characters arrived`);
  assert.doesNotMatch(got.text, /idle_timeout/);
  assert.match(got.text, /data: \[DONE\]/);
  assert.ok(got.endedAt > 2 * IDLE_MS, `the read took ${got.endedAt} ms, two idle windows`);
  // The slow reader held the upstream's body back: it was read to its end only late.
  assert.ok(upstreamEnded > IDLE_MS, `the upstream's body ended at ${upstreamEnded} ms`);
  const { request } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(request.status, 200);
  assert.equal(request.errorCode, null);
});

Deno.test("a whole answer whose body stalls half-way fails over at 300 s", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  a!.setHandler(() => ({ body: [{ send: '{"id":"x","choices":[' }, { hang: true }] }));
  b!.setHandler(() => ({
    body: [{ send: JSON.stringify({ choices: [{ message: { content: "whole" } }] }) }],
  }));
  const got = await v.send("/v1/chat/completions", chat(false));
  assert.equal(got.status, 200);
  assert.equal(JSON.parse(got.text).choices[0].message.content, "whole");
  assert.equal(got.headersAt, IDLE_MS, "the whole answer came when the stall was given up on");
  assert.equal(await a!.calls[0]!.closed, "cancelled");
});
