import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { chatRoute, eventually, postJson, startTestGateway } from "./harness.ts";
import {
  chatError,
  chatStream,
  contentThenSilence,
  keepAlivesOnly,
  silentAfterHeaders,
} from "./fake_upstreams/openai_chat_script.ts";
import { bedrockEvent } from "./fake_upstreams/bedrock_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

// TEST_SCALE 0.01: idle timeout 300 ms, opening hold 150 ms, keep-alive every 150 ms.
const failover = { idle_timeout_secs: 30 };
// A 600 ms window: where the hold must pass before an idle timeout, 4x the hold.
const wideWindow = { idle_timeout_secs: 60 };
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

Deno.test("whole answers are never answered early", async () => {
  const a = startFakeUpstream({ fallback: () => silentAfterHeaders });
  const b = startFakeUpstream({
    fallback: () => ({
      body: [{ send: JSON.stringify({ choices: [{ message: { content: "late" } }] }) }],
    }),
  });
  const gw = await startTestGateway(chatRoute([a.url, b.url], { failover }));
  try {
    const started = Date.now();
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(false));
    const headersAt = Date.now() - started;
    assert.equal(res.status, 200);
    assert.ok(
      headersAt >= 290,
      `no headers before the first candidate's timeout (${headersAt} ms)`,
    );
    assert.equal((await res.json()).choices[0].message.content, "late");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("after early headers, an in-stream error fails over cleanly", async () => {
  const a = startFakeUpstream();
  const b = startFakeUpstream({ fallback: () => chatStream(good) });
  // The error comes 600 ms in: 4x the 150 ms hold, and a third of the 2 s window.
  const gw = await startTestGateway(
    chatRoute([a.url, b.url], { failover: { idle_timeout_secs: 200 } }),
  );
  try {
    a.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: [
        { send: ": ping\n\n" },
        { wait: 600 },
        { send: 'data: {"error":{"message":"overloaded mid-way","type":"server_error"}}\n\n' },
      ],
    });
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    const text = await res.text();
    assert.match(text, /^: keep-alive\n\n/, "the hold passed before the error");
    assert.doesNotMatch(text, /overloaded|: ping/, "nothing of the abandoned upstream");
    assert.match(text, /good /);
    const { attempts, request } = await gw.row(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => x.outcome), ["error", "success"]);
    assert.equal(request.outcome, "success");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("a last upstream's 400 after early headers is told in the stream", async () => {
  const a = startFakeUpstream({ fallback: () => silentAfterHeaders });
  const b = startFakeUpstream({ fallback: () => chatError(400, "messages too long") });
  const gw = await startTestGateway(chatRoute([a.url, b.url], { failover: wideWindow }));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /: keep-alive/);
    assert.match(text, /data: \{"error":\{"message":"messages too long/);
    const { request } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(request.status, 400);
    assert.equal(request.failureSource, "client");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

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
  }, /\n\n\{"error":[\s\S]*idle_timeout_mid_stream"[\s\S]*\}\n$/],
];

for (const [format, path, body, ending] of ENDINGS) {
  Deno.test(`${format}: content then silence ends with the client's error event`, async () => {
    const up = startFakeUpstream({ fallback: () => contentThenSilence("partial answer") });
    const gw = await startTestGateway(chatRoute([up.url], { failover }));
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
  const answer = chatStream({ text: Array(40).fill(big) });
  const up = startFakeUpstream({ fallback: () => answer });
  // A 600 ms window: the fast upstream's 1 MB chunks come far inside it, even loaded.
  const gw = await startTestGateway(chatRoute([up.url], { failover: wideWindow }));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    const reader = res.body!.getReader();
    let bytes = 0;
    let reads = 0;
    const started = Date.now();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      // Far slower than the upstream at first, for more than two idle windows.
      if (++reads <= 12) await new Promise((r) => setTimeout(r, 110));
    }
    assert.ok(Date.now() - started > 1200, "the read took longer than two idle windows");
    assert.ok(bytes > 40 * 1024 * 1024, `all ${bytes} bytes arrived`);
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
