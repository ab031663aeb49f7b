import assert from "node:assert/strict";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import {
  chatError,
  chatStream,
  chatStreamBlocks,
  chatWhole,
  headersNever,
} from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const messages = [{ role: "user", content: "hi" }];
const whole = { model: "smart", messages };
const good = { text: ["fine"], usage: { input: 1, output: 1 } };

Deno.test("our credential refused (401/403) fails over at once and counts for cooldown", async () => {
  const a = startFakeUpstream({ fallback: () => chatError(401, "bad key") });
  const b = startFakeUpstream({ fallback: () => chatWhole(good) });
  const gw = await startTestGateway(chatRoute([a.url, b.url]));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, whole);
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.equal(a.calls.length, 1, "not retried");
    assert.equal(gw.cooldowns.get("up1").consecutiveFailures, 1);
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.errorCode, "gw.upstream.credentials");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("a 429's Retry-After pauses the member that said it, not its upstream; a single candidate ignores cooldown", async () => {
  const a = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([a.url]));
  try {
    a.enqueue({ ...chatError(429, "slow down"), headers: { "retry-after": "600" } });
    const limited = await postJson(`${gw.url}/v1/chat/completions`, whole);
    assert.equal(limited.status, 429, "all upstreams rate-limited stays a 429");
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    await limited.body?.cancel();
    assert.equal(a.calls.length, 1, "a Retry-After over 10 s is not waited out");
    // Rate limits are mostly per model (docs/design.md "Cooldown"): up1's other models go on.
    assert.equal(gw.cooldowns.isPaused("up1/model-1"), true);
    assert.equal(gw.cooldowns.isPaused("up1"), false);
    a.enqueue(chatWhole(good));
    const res = await postJson(`${gw.url}/v1/chat/completions`, whole);
    assert.equal(res.status, 200, "the only candidate is tried although paused");
    await res.body?.cancel();
    assert.equal(gw.cooldowns.isPaused("up1/model-1"), false, "one success resets it");
  } finally {
    await gw.stop();
    await a.close();
  }
});

Deno.test("every candidate paused: fail open, the soonest-free first", async () => {
  const a = startFakeUpstream({ fallback: () => chatWhole(good) });
  const b = startFakeUpstream({ fallback: () => chatWhole(good) });
  const gw = await startTestGateway(chatRoute([a.url, b.url]));
  try {
    gw.cooldowns.pauseFor("up1", 500);
    gw.cooldowns.pauseFor("up2", 100);
    const res = await postJson(`${gw.url}/v1/chat/completions`, whole);
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.deepEqual([a.calls.length, b.calls.length], [0, 1]);
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("whole_answer_deadline cascades without retrying, with a recovery hint", async () => {
  const slow = () => ({ headerDelay: 10, body: [{ wait: 800 }, { send: "{}" }] });
  const a = startFakeUpstream({ fallback: slow });
  const b = startFakeUpstream({ fallback: slow });
  const gw = await startTestGateway(chatRoute([a.url, b.url], {
    failover: {
      idle_timeout_secs: 3600,
      whole_answer_deadline: { base_secs: 10, per_output_token_ms: 100, max_secs: 90 },
    },
  }));
  try {
    // 10 s + 100 tokens × 100 ms = 20 s, scaled to 200 ms.
    const started = Date.now();
    const res = await postJson(`${gw.url}/v1/chat/completions`, { ...whole, max_tokens: 100 });
    const body = await res.json();
    assert.equal(res.status, 504);
    assert.equal(res.headers.get("x-pulsegate-error"), "timeout");
    assert.equal(body.error.code, "gw.upstream.deadline");
    assert.match(body.error.message, /stream: true/);
    assert.match(body.error.message, /max_tokens/);
    assert.deepEqual([a.calls.length, b.calls.length], [1, 1], "cascaded, never retried");
    const took = Date.now() - started;
    assert.ok(took >= 390 && took < 1500, `two 200 ms deadlines, took ${took} ms`);
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("timeout_status 503 replaces 504 for deployments behind picky proxies", async () => {
  const a = startFakeUpstream({ fallback: () => headersNever });
  // The upstream never answers, so no window can be missed: 50 s (0.5 s) ends it sooner.
  const gw = await startTestGateway(
    chatRoute([a.url], { failover: { timeout_status: 503, idle_timeout_secs: 50 } }),
  );
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, whole);
    assert.equal(res.status, 503);
    assert.equal((await res.json()).error.code, "gw.upstream.idle_timeout");
  } finally {
    await gw.stop();
    await a.close();
  }
});

Deno.test("a retried last candidate's opening waits for content: the client sees one answer start", async () => {
  // The opening hold has answered the headers when the first attempt sends its role chunk and
  // breaks; a retry is still to come, so that chunk must be held like any other candidate's,
  // or the retry's own role chunk reaches the client as a second start.
  // No usage chunk: one the client did not ask for is not passed on.
  const plain = { text: ["fine"] };
  const blocks = chatStreamBlocks(plain);
  let headersOut!: () => void;
  const afterHeaders = new Promise<void>((r) => (headersOut = r));
  const a = startFakeUpstream();
  a.enqueue({
    headers: { "content-type": "text/event-stream" },
    // The pause lets the role chunk reach the gateway first: a reset drops what is still queued.
    body: [{ until: afterHeaders }, { send: blocks[0]! }, { wait: 200 }, { reset: true }],
  });
  a.enqueue(chatStream(plain));
  const gw = await startTestGateway(chatRoute([a.url], { failover: { idle_timeout_secs: 3600 } }));
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, { ...whole, stream: true });
    assert.equal(res.status, 200, "the opening hold answered the headers");
    headersOut();
    // The gateway's own keep-alives run until content, so they may come between the blocks.
    const text = (await res.text()).replaceAll(": keep-alive\n\n", "");
    assert.equal(a.calls.length, 2, "retried once");
    assert.equal(text, blocks.join(""), "the retry's answer, byte for byte, and nothing else");
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => x.outcome), ["error", "success"]);
  } finally {
    headersOut();
    await gw.stop();
    await a.close();
  }
});
