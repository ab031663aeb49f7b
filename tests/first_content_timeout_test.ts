import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { startTestGateway, type TestGateway } from "./harness.ts";
import {
  chatStream,
  chatStreamBlocks,
  chatWhole,
  slowFirstToken,
} from "./fake_upstreams/openai_chat_script.ts";
import { type Call, startFakeUpstream } from "./fake_upstreams/server.ts";

/**
 * `first_content_timeout_secs` end to end (docs/liveness.md): a route that
 * demands a first token in 100 s gives up on a candidate whose first token
 * would come after 200 s, although its idle timeout (300 s) is far off and the
 * candidate sends keep-alives all the while; the next candidate answers.
 * 100 s is 1 s at TEST_SCALE (0.01): the request must reach the slow fake
 * before the route gives up on it, which a loaded machine once took over
 * 150 ms for (a cold process) and once over 500 ms (three shards beside a
 * burned core).
 */

/** 200 s scaled by TEST_SCALE (0.01). */
const SLOW_FIRST_TOKEN_MS = 2_000;

/** Keep-alives (a role-only chunk and comments; whitespace when whole) until the late token. */
const slowFirstTokenFor = (call: Call, opts: { whole: boolean }) =>
  slowFirstToken(call, { ms: SLOW_FIRST_TOKEN_MS, text: ["late"], whole: opts.whole });

function config(
  slow: string,
  fast: string,
  opts: { routeSecs?: number; slowSecs?: number } = { routeSecs: 100 },
): ConfigInput {
  return {
    failover: { idle_timeout_secs: 300 },
    upstreams: [
      { id: "slow", kind: "openai-chat", base_url: slow },
      { id: "fast", kind: "openai-chat", base_url: fast },
    ],
    routes: [{
      model: "smart",
      first_content_timeout_secs: opts.routeSecs,
      candidates: [
        { upstream: "slow", model: "s", first_content_timeout_secs: opts.slowSecs },
        // The answering upstream gets 2 s of its own: the route's 1 s is the slow one's test.
        { upstream: "fast", model: "f", first_content_timeout_secs: 200 },
      ],
    }],
  };
}

async function withGateway(
  opts: { whole: boolean },
  run: (gw: TestGateway) => Promise<void>,
): Promise<{ slowCalls: Call[] }> {
  const slow = startFakeUpstream({ fallback: (call) => slowFirstTokenFor(call, opts) });
  const fast = startFakeUpstream({
    fallback: () =>
      opts.whole ? chatWhole({ text: ["from fast"] }) : chatStream({ text: ["from ", "fast"] }),
  });
  const gw = await startTestGateway(config(slow.url, fast.url));
  try {
    await run(gw);
    return { slowCalls: slow.calls };
  } finally {
    await gw.stop();
    await slow.close();
    await fast.close();
  }
}

/** The row says the slow hop timed out waiting for its first content and the fast one answered. */
async function assertFailedOver(gw: TestGateway, id: string, started: number): Promise<void> {
  const { request, attempts } = await gw.row(id);
  assert.equal(request.outcome, "success");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome, a.errorCode]), [
    ["slow", "idle_timeout", "gw.upstream.first_content_timeout"],
    ["fast", "success", null],
  ]);
  // Like an idle timeout before content, it counts for cooldown.
  assert.equal(gw.cooldowns.get("slow").consecutiveFailures, 1);
  // Given up at 100 s (1 s), before the 300 s (3 s) idle timeout could have fired.
  assert.ok(Date.now() - started < 3_000, `took ${Date.now() - started} ms`);
}

const clients = {
  openai: async (gw: TestGateway, opts: { stream: boolean; id: string }) => {
    const client = gw.openai();
    const messages = [{ role: "user" as const, content: "hi" }];
    const headers = { "x-request-id": opts.id };
    if (!opts.stream) {
      const res = await client.chat.completions.create({ model: "smart", messages }, { headers });
      return res.choices[0]?.message.content ?? "";
    }
    const stream = await client.chat.completions.create(
      { model: "smart", messages, stream: true },
      { headers },
    );
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    return text;
  },
  anthropic: async (gw: TestGateway, opts: { stream: boolean; id: string }) => {
    const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
    const body = {
      model: "smart",
      max_tokens: 50,
      messages: [{ role: "user" as const, content: "hi" }],
    };
    const headers = { "x-request-id": opts.id };
    if (!opts.stream) {
      const msg = await client.messages.create(body, { headers });
      return msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    }
    const stream = client.messages.stream(body, { headers });
    const msg = await stream.finalMessage();
    return msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
  },
};

for (const [name, ask] of Object.entries(clients)) {
  for (const stream of [true, false]) {
    const mode = stream ? "streamed" : "whole";
    Deno.test(`${name} SDK, ${mode}: a first token later than first_content_timeout_secs fails over`, async () => {
      const id = `fct-${name}-${mode}`;
      const { slowCalls } = await withGateway({ whole: !stream }, async (gw) => {
        const started = Date.now();
        assert.equal(await ask(gw, { stream, id }), "from fast");
        await assertFailedOver(gw, id, started);
      });
      assert.equal(
        slowCalls.length,
        1,
        "a first-content timeout is never retried on the same upstream",
      );
      assert.equal(await slowCalls[0]!.closed, "cancelled");
    });
  }
}

Deno.test("without first_content_timeout_secs a slow first token is waited for (off by default)", async () => {
  const slow = startFakeUpstream({
    fallback: () => ({
      headers: { "content-type": "text/event-stream" },
      body: [
        { send: ": keep-alive\n\n" },
        // 100 s: what the other tests' route would give up at, well inside the 3 s idle timeout.
        { wait: 1_000 },
        ...chatStreamBlocks({ text: ["late"] }).map((send) => ({ send })),
      ],
    }),
  });
  const fast = startFakeUpstream({ fallback: () => chatStream({ text: ["from fast"] }) });
  const gw = await startTestGateway(config(slow.url, fast.url, {}));
  try {
    const stream = await gw.openai().chat.completions.create(
      { model: "smart", messages: [{ role: "user", content: "hi" }], stream: true },
      { headers: { "x-request-id": "fct-off" } },
    );
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "late");
    assert.equal(fast.calls.length, 0);
  } finally {
    await gw.stop();
    await slow.close();
    await fast.close();
  }
});

Deno.test("a candidate's own first_content_timeout_secs overrides its route's", async () => {
  const slow = startFakeUpstream({ fallback: (call) => slowFirstTokenFor(call, { whole: false }) });
  const fast = startFakeUpstream({ fallback: () => chatStream({ text: ["from fast"] }) });
  // The route would give up at 50 s; the candidate allows an hour, so its late token is waited for.
  const gw = await startTestGateway(config(slow.url, fast.url, { routeSecs: 50, slowSecs: 3600 }));
  try {
    const ask = gw.openai().chat.completions.create({
      model: "smart",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    }, { headers: { "x-request-id": "fct-override" } });
    const stream = await ask;
    // The slow fake holds its token until the gateway hangs up: the idle timeout (300 s) does.
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "from fast");
    const { attempts } = await gw.row("fct-override");
    assert.deepEqual(attempts.map((a) => [a.upstream, a.errorCode]), [
      ["slow", "gw.upstream.idle_timeout"],
      ["fast", null],
    ]);
  } finally {
    await gw.stop();
    await slow.close();
    await fast.close();
  }
});

Deno.test("on the last candidate it is the client's timeout error, with its own code", async () => {
  const slow = startFakeUpstream({ fallback: (call) => slowFirstTokenFor(call, { whole: true }) });
  const gw = await startTestGateway({
    failover: { idle_timeout_secs: 300 },
    upstreams: [{ id: "slow", kind: "openai-chat", base_url: slow.url }],
    routes: [{
      model: "smart",
      first_content_timeout_secs: 50,
      candidates: [{ upstream: "slow", model: "s" }],
    }],
  });
  try {
    const err = await gw.openai().chat.completions.create(
      { model: "smart", messages: [{ role: "user", content: "hi" }] },
      { headers: { "x-request-id": "fct-last" } },
    ).then(() => null, (e: unknown) => e);
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.deepEqual([err.status, err.type, err.code], [
      504,
      "timeout_error",
      "gw.upstream.first_content_timeout",
    ]);
    const { request, attempts } = await gw.row("fct-last");
    assert.equal(request.errorCode, "gw.upstream.first_content_timeout");
    assert.deepEqual(attempts.map((a) => a.outcome), ["idle_timeout"]);
  } finally {
    await gw.stop();
    await slow.close();
  }
});
