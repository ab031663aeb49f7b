import assert from "node:assert/strict";
import { chatRoute, postJson, startTestGateway } from "./harness.ts";
import {
  chatError,
  chatStream,
  chatStreamBlocks,
  chatWhole,
  chatWholeBody,
} from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const answer = { text: ["Hel", "lo ", "world"], usage: { input: 11, output: 3 } };

Deno.test("streamed chat answer reaches the openai SDK intact and is recorded", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    up.enqueue(chatStream(answer, { gap: 5 }));
    const stream = await gw.openai().chat.completions.create({
      model: "smart",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hi" }],
    }).withResponse();
    const id = stream.response.headers.get("x-request-id");
    assert.ok(id);
    let text = "";
    let usage;
    for await (const chunk of stream.data) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    assert.equal(text, "Hello world");
    assert.equal(usage?.completion_tokens, 3);
    const sent = up.calls[0]!.json as Record<string, unknown>;
    assert.equal(sent.model, "model-1", "the route's upstream model is sent");
    const { request, attempts } = await gw.row(id);
    assert.equal(request.status, 200);
    assert.equal(request.outcome, "success");
    assert.equal(request.route, "smart");
    assert.equal(request.upstream, "up1");
    assert.equal(request.inputTokens, 11);
    assert.equal(request.outputTokens, 3);
    assert.ok(request.firstContentMs !== null && request.durationMs !== null);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0]!.outcome, "success");
    assert.equal(attempts[0]!.status, 200);
    assert.equal(attempts[0]!.outputTokens, 3);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("same-format bodies pass through byte for byte, streamed and whole", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    up.enqueue(chatStream(answer), chatWhole(answer));
    const body = { model: "smart", messages: [{ role: "user", content: "hi" }] };
    const streamed = await postJson(`${gw.url}/v1/chat/completions`, {
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(streamed.status, 200);
    assert.match(streamed.headers.get("content-type") ?? "", /text\/event-stream/);
    assert.equal(await streamed.text(), chatStreamBlocks(answer).join(""));
    const whole = await postJson(`${gw.url}/v1/chat/completions`, body);
    assert.equal(whole.status, 200);
    assert.ok(whole.headers.get("x-request-id"));
    assert.equal(await whole.text(), chatWholeBody(answer));
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("whole answer through the SDK, with the request and attempt rows", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    up.enqueue(chatWhole(answer));
    const res = await gw.openai().chat.completions.create({
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
    }).withResponse();
    assert.equal(res.data.choices[0]?.message.content, "Hello world");
    assert.equal(res.data.usage?.prompt_tokens, 11);
    const { request, attempts } = await gw.row(res.response.headers.get("x-request-id")!);
    assert.equal(request.stream, false);
    assert.equal(request.outputTokens, 3);
    assert.deepEqual(attempts.map((a) => [a.hop, a.upstream, a.model, a.outcome]), [
      [1, "up1", "model-1", "success"],
    ]);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("bad input gets an OpenAI-format 4xx, is recorded, and never reaches the upstream", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]));
  const url = `${gw.url}/v1/chat/completions`;
  const cases: Array<[string, string | unknown, number, string]> = [
    ["malformed JSON", "{not json", 400, "gw.client.invalid_json"],
    ["missing model", { messages: [] }, 400, "gw.client.invalid_request"],
    ["unknown model", { model: "nope", messages: [] }, 404, "gw.client.unknown_model"],
    ["wrong type", { model: "smart", messages: "hi" }, 400, "gw.client.invalid_request"],
    [
      "nested too deep",
      `{"model":"smart","messages":[],"extra":${"[".repeat(129)}${"]".repeat(129)}}`,
      400,
      "gw.client.invalid_json",
    ],
    // Brackets inside strings are text, not nesting.
    [
      "deep-looking text is fine",
      { model: "smart", messages: "[[[[".repeat(100) },
      400,
      "gw.client.invalid_request",
    ],
    [
      "over the limit",
      `{"model":"smart","pad":"${"x".repeat(33 * 1024 * 1024)}"}`,
      413,
      "gw.client.body_too_large",
    ],
  ];
  try {
    for (const [name, body, status, code] of cases) {
      const res = await postJson(url, body);
      const json = await res.json();
      assert.equal(res.status, status, name);
      assert.equal(json.error.code, code, name);
      assert.equal(typeof json.error.message, "string", name);
      assert.equal(res.headers.get("x-pulsegate-error"), "client", name);
      const { request, attempts } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.status, status, name);
      assert.equal(request.failureSource, "client", name);
      assert.equal(request.errorCode, code, name);
      assert.equal(attempts.length, 0, name);
    }
    assert.equal(up.calls.length, 0, "no bad request reached the upstream");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("an upstream 500 is retried then fails over to the next candidate", async () => {
  const a = startFakeUpstream();
  const b = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([a.url, b.url]));
  try {
    a.setHandler(() => chatError(500, "boom"));
    b.enqueue(chatWhole(answer));
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, "Hello world");
    assert.equal(a.calls.length, 2, "one try and one retry on the first candidate");
    assert.equal(b.calls.length, 1);
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome, x.status]), [
      ["up1", "error", 500],
      ["up1", "error", 500],
      ["up2", "success", 200],
    ]);
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("an upstream 400 is the caller's: passed on, no failover", async () => {
  const a = startFakeUpstream();
  const b = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([a.url, b.url]));
  try {
    a.enqueue(chatError(400, "max_tokens is too large"));
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
    });
    const json = await res.json();
    assert.equal(res.status, 400);
    assert.equal(res.headers.get("x-pulsegate-error"), "client");
    assert.match(json.error.message, /max_tokens is too large/);
    assert.equal(b.calls.length, 0);
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("models, health and readiness", async () => {
  const gw = await startTestGateway(chatRoute(["http://127.0.0.1:9"]));
  try {
    const models = await gw.openai().models.list();
    assert.deepEqual(models.data.map((m) => m.id), ["smart"]);
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
    const ready = await fetch(`${gw.url}/readyz`);
    assert.equal(ready.status, 200);
    await ready.body?.cancel();
  } finally {
    await gw.stop();
  }
});
