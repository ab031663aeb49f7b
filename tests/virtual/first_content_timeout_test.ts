/**
 * `first_content_timeout_secs` end to end (docs/liveness.md), in virtual time: a route that
 * demands a first token in 15 s gives up on a candidate at 15 s exactly, although its idle
 * timeout (300 s) is far off and the candidate sends keep-alives all the while; the next
 * candidate answers. Through the official OpenAI and Anthropic SDKs.
 */
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatStream,
  chatStreamBlocks,
  chatWhole,
  chatWholeBody,
} from "../fake_upstreams/openai_chat_script.ts";
import type { Call, Script, Step } from "../fake_upstreams/server.ts";

const FIRST_MS = 15_000;
const IDLE_MS = 300_000;

/**
 * Keep-alives every 5 s for 300 s (a role-only chunk and comments; whitespace when whole), then
 * the token, held until the caller hangs up: whatever the gateway decides, it never comes.
 */
function slowFirstToken(call: Call, opts: { whole: boolean }): Script {
  const keepAlive = opts.whole ? "\n" : ": keep-alive\n\n";
  const waits: Step[] = [];
  for (let t = 0; t < IDLE_MS; t += 5_000) waits.push({ send: keepAlive }, { wait: 5_000 });
  const late = { until: call.closed };
  if (opts.whole) return { body: [...waits, late, { send: chatWholeBody({ text: ["late"] }) }] };
  const [role, ...rest] = chatStreamBlocks({ text: ["late"] });
  return {
    headers: { "content-type": "text/event-stream" },
    body: [{ send: role! }, ...waits, late, ...rest.map((send) => ({ send }))],
  };
}

function config(
  [slow, fast]: string[],
  opts: { routeSecs?: number; slowSecs?: number } = { routeSecs: FIRST_MS / 1000 },
): ConfigInput {
  return {
    upstreams: [
      { id: "slow", kind: "openai-chat", base_url: slow! },
      { id: "fast", kind: "openai-chat", base_url: fast! },
    ],
    routes: [{
      model: "smart",
      first_content_timeout_secs: opts.routeSecs,
      candidates: [
        { upstream: "slow", model: "s", first_content_timeout_secs: opts.slowSecs },
        { upstream: "fast", model: "f" },
      ],
    }],
  };
}

async function slowAndFast(opts: { whole: boolean; routeSecs?: number; slowSecs?: number }) {
  const v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => config(urls, "routeSecs" in opts || "slowSecs" in opts ? opts : undefined),
  });
  v.ups[0]!.setHandler((call) => slowFirstToken(call, opts));
  v.ups[1]!.setHandler(() =>
    opts.whole ? chatWhole({ text: ["from fast"] }) : chatStream({ text: ["from ", "fast"] })
  );
  return v;
}

/** The row says the slow hop timed out waiting for its first content and the fast one answered. */
async function assertFailedOver(v: VirtualGateway, id: string): Promise<void> {
  const { request, attempts } = await v.row(id);
  assert.equal(request.outcome, "success");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome, a.errorCode]), [
    ["slow", "idle_timeout", "gw.upstream.first_content_timeout"],
    ["fast", "success", null],
  ]);
  // Like an idle timeout before content, it counts for cooldown.
  assert.equal(v.gw.cooldowns.get("slow").consecutiveFailures, 1);
}

const clients = {
  openai: async (v: VirtualGateway, opts: { stream: boolean; id: string }) => {
    const client = new OpenAI({
      baseURL: "http://127.0.0.1/v1",
      apiKey: "unused",
      maxRetries: 0,
      fetch: v.fetch,
    });
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
  anthropic: async (v: VirtualGateway, opts: { stream: boolean; id: string }) => {
    const client = new Anthropic({
      baseURL: "http://127.0.0.1",
      apiKey: "unused",
      maxRetries: 0,
      fetch: v.fetch,
    });
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
    Deno.test(`${name} SDK, ${mode}: no first token in first_content_timeout_secs (15 s) fails over at 15 s`, async () => {
      const id = `fct-${name}-${mode}`;
      await using v = await slowAndFast({ whole: !stream });
      const started = v.clock.now();
      assert.equal(await v.run(ask(v, { stream, id })), "from fast");
      assert.equal(v.clock.elapsed(started), FIRST_MS, "given up on at 15 s exactly");
      await assertFailedOver(v, id);
      const slowCalls = v.ups[0]!.calls;
      assert.equal(
        slowCalls.length,
        1,
        "a first-content timeout is never retried on the same upstream",
      );
      assert.equal(await slowCalls[0]!.closed, "cancelled");
    });
  }
}

Deno.test("the first-content timeout gives up at 15 s, not at 14.999 s", async () => {
  await using v = await slowAndFast({ whole: false });
  const got = await v.send("/v1/chat/completions", {
    model: "smart",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(v.ups[1]!.calls.length, 1);
  const fast = got.pieces.find((p) => p.text.includes("from "));
  assert.equal(fast?.at, FIRST_MS);
  assert.ok(got.pieces.every((p) => p.at >= FIRST_MS), "nothing before 15 s, not even the hold");
});

Deno.test("without first_content_timeout_secs a slow first token is waited for (off by default)", async () => {
  await using v = await startVirtualGateway({ upstreams: 2, config: (urls) => config(urls, {}) });
  v.ups[0]!.setHandler(() => ({
    headers: { "content-type": "text/event-stream" },
    body: [
      { send: ": keep-alive\n\n" },
      // 100 s: far past what the other tests' route gives up at, inside the 300 s idle timeout.
      { wait: 100_000 },
      ...chatStreamBlocks({ text: ["late"] }).map((send) => ({ send })),
    ],
  }));
  v.ups[1]!.setHandler(() => chatStream({ text: ["from fast"] }));
  const got = await v.send("/v1/chat/completions", {
    model: "smart",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(got.pieces.find((p) => p.text.includes("late"))?.at, 100_000);
  assert.equal(v.ups[1]!.calls.length, 0);
});

Deno.test("a candidate's own first_content_timeout_secs overrides its route's", async () => {
  // The route would give up at 50 s; the candidate allows an hour, so the idle timeout (300 s)
  // is what gives up on it.
  await using v = await slowAndFast({ whole: false, routeSecs: 50, slowSecs: 3600 });
  const got = await v.send("/v1/chat/completions", {
    model: "smart",
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  }, { headers: { "x-request-id": "fct-override" } });
  assert.equal(got.pieces.find((p) => p.text.includes("from "))?.at, IDLE_MS);
  const { attempts } = await v.row("fct-override");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.errorCode]), [
    ["slow", "gw.upstream.idle_timeout"],
    ["fast", null],
  ]);
});

Deno.test("on the last candidate it is the client's timeout error, with its own code, at 50 s", async () => {
  await using v = await startVirtualGateway({
    config: ([url]) => ({
      upstreams: [{ id: "slow", kind: "openai-chat", base_url: url! }],
      routes: [{
        model: "smart",
        first_content_timeout_secs: 50,
        candidates: [{ upstream: "slow", model: "s" }],
      }],
    }),
  });
  v.ups[0]!.setHandler((call) => slowFirstToken(call, { whole: true }));
  const client = new OpenAI({
    baseURL: "http://127.0.0.1/v1",
    apiKey: "unused",
    maxRetries: 0,
    fetch: v.fetch,
  });
  const started = v.clock.now();
  const err = await v.run(
    client.chat.completions.create(
      { model: "smart", messages: [{ role: "user", content: "hi" }] },
      { headers: { "x-request-id": "fct-last" } },
    ).then(() => null, (e: unknown) => e),
  );
  assert.equal(v.clock.elapsed(started), 50_000);
  assert.ok(err instanceof OpenAI.APIError, String(err));
  assert.deepEqual([err.status, err.type, err.code], [
    504,
    "timeout_error",
    "gw.upstream.first_content_timeout",
  ]);
  const { request, attempts } = await v.row("fct-last");
  assert.equal(request.errorCode, "gw.upstream.first_content_timeout");
  assert.deepEqual(attempts.map((a) => a.outcome), ["idle_timeout"]);
});
