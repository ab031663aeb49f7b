/** The opening hold: what a client sees while a candidate is held until its first content. */
import assert from "node:assert/strict";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import { chatError, chatStream, silentAfterHeaders } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

// TEST_SCALE 0.01: idle timeout 300 ms, opening hold 150 ms, keep-alive every 150 ms.
const failover = { idle_timeout_secs: 30 };
// A 600 ms window: where the hold must pass before an idle timeout, 4x the hold.
const wideWindow = { idle_timeout_secs: 60 };
const good = { text: ["good ", "answer"], usage: { input: 5, output: 2 } };
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });

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
