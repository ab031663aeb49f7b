/** The idle timer: what restarts it (content) and what never does (keep-alives, a slow reader). */
import assert from "node:assert/strict";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import {
  chatStream,
  contentThenSilence,
  keepAlivesOnly,
} from "./fake_upstreams/openai_chat_script.ts";
import { bedrockEvent } from "./fake_upstreams/bedrock_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

// TEST_SCALE 0.01: idle timeout 300 ms, opening hold 150 ms, keep-alive every 150 ms.
const failover = { idle_timeout_secs: 30 };
// A 600 ms window: where the hold must pass before an idle timeout, 4x the hold.
const wideWindow = { idle_timeout_secs: 60 };
// A 1.2 s window: the content must come before it, which took over 300 ms on a loaded machine.
const contentWindow = { idle_timeout_secs: 120 };
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
  Deno.test(`${format}: content then silence ends with the client's error event`, async () => {
    const up = startFakeUpstream({ fallback: () => contentThenSilence("partial answer") });
    const gw = await startTestGateway(chatRoute([up.url], { failover: contentWindow }));
    try {
      const res = await postJson(`${gw.url}${path}`, body);
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, /partial answer/);
      assert.match(text, ending);
      assert.equal(gw.cooldowns.isPaused("up1"), false);
    } finally {
      await gw.stop();
      await up.close();
    }
  });
}

Deno.test("bedrock messageStart alone still times out", async () => {
  const up = startFakeUpstream({
    fallback: () => ({
      headers: { "content-type": "application/vnd.amazon.eventstream" },
      body: [{ send: bedrockEvent("messageStart", { role: "assistant" }) }, { hang: true }],
    }),
  });
  const gw = await startTestGateway({
    failover,
    upstreams: [{
      id: "br",
      kind: "bedrock",
      base_url: up.url,
      region: "us-east-1",
      access_key_env: "AK",
      secret_key_env: "SK",
    }],
    routes: [{ model: "smart", candidates: [{ upstream: "br", model: "m" }] }],
  }, { env: { AK: "a", SK: "b" } });
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    assert.match(await res.text(), /gw\.upstream\.idle_timeout"/);
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.outcome, "idle_timeout");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("chat keep-alives alone still time out", async () => {
  const up = startFakeUpstream({ fallback: () => keepAlivesOnly(40) });
  const gw = await startTestGateway(chatRoute([up.url], { failover }));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    assert.match(await res.text(), /gw\.upstream\.idle_timeout"/);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a client slow to read a fast answer is not taken for upstream silence", async () => {
  // Big enough to fill the socket and the server's buffers, so writes to the client block.
  // Built once, here: building 40 MB of chunks per call took the idle window's time on a
  // loaded machine before the first byte, so the upstream was not fast at all.
  const big = "x".repeat(1024 * 1024);
  // A short first piece: the first content comes at once, whatever a loaded machine takes to
  // carry and parse a 1 MB event; the window is about the client, not that.
  const answer = chatStream({ text: ["Hi", ...Array(40).fill(big)] });
  const up = startFakeUpstream({ fallback: () => answer });
  // A 600 ms window: the fast upstream's 1 MB chunks come far inside it, even loaded.
  const gw = await startTestGateway(chatRoute([up.url], { failover: wideWindow }));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    const reader = res.body!.getReader();
    let bytes = 0;
    const started = Date.now();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      // Far slower than the upstream at first, for more than two idle windows: 110 ms per MiB
      // of the first 12 MiB, however the runtime cuts the body into reads.
      const owed = Math.min(bytes, 12 * 1024 * 1024) / (1024 * 1024) * 110;
      const waited = Date.now() - started;
      if (owed > waited) await new Promise((r) => setTimeout(r, owed - waited));
    }
    assert.ok(bytes > 40 * 1024 * 1024, `all ${bytes} bytes arrived`);
    assert.ok(Date.now() - started > 1200, "the read took longer than two idle windows");
    const { request } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(request.status, 200);
    assert.equal(request.errorCode, null);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a whole answer whose body stalls half-way fails over", async () => {
  const a = startFakeUpstream({
    fallback: () => ({ body: [{ send: '{"id":"x","choices":[' }, { hang: true }] }),
  });
  const b = startFakeUpstream({
    fallback: () => ({
      body: [{ send: JSON.stringify({ choices: [{ message: { content: "whole" } }] }) }],
    }),
  });
  const gw = await startTestGateway(chatRoute([a.url, b.url], { failover }));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(false));
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, "whole");
    assert.equal(await a.calls[0]!.closed, "cancelled");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});
