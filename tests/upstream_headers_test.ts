/**
 * `upstreams[].headers` (docs/providers.md "Extra headers"): literal values and secrets named by
 * env vars reach the upstream on every call, whatever the client's format; never one of the
 * gateway's own auth, framing or tracing headers; a secret that is not set is a config fault of
 * that upstream, failed over, with the variable named and no value shown.
 */
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { NEVER_FORWARDED } from "../gateway/formats/client_headers.ts";
import { isGatewayOwnedHeader } from "../gateway/config/upstream_headers_schema.ts";
import { postJson, startTestGateway } from "./harness.ts";
import { chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { type Call, startFakeUpstream } from "./fake_upstreams/server.ts";

/** A Chat answer, streamed or whole as the call asks. */
const chatAnswer = (text: string) => (call: Call) =>
  (call.json as { stream?: boolean }).stream
    ? chatStream({ text: [text] })
    : chatWhole({ text: [text] });

const env = { OPENROUTER_KEY: "sk-or-secret", TENANT_TOKEN: "tenant-secret-123" };

const openRouterHeaders = {
  "HTTP-Referer": "https://app.example.com",
  "X-Title": "Example App",
  "X-Tenant-Token": { env: "TENANT_TOKEN" },
};

function route(
  url: string,
  opts: { kind: "openai-chat" | "anthropic"; headers: Record<string, unknown>; backup?: string },
): ConfigInput {
  return {
    failover: { retries_per_candidate: 0 },
    upstreams: [
      {
        id: "up",
        kind: opts.kind,
        base_url: url,
        api_key_env: "OPENROUTER_KEY",
        headers: opts.headers as Record<string, string>,
      },
      ...(opts.backup
        ? [{ id: "backup", kind: "openai-chat" as const, base_url: opts.backup }]
        : []),
    ],
    routes: [{
      model: "smart",
      candidates: [
        { upstream: "up", model: "openai/gpt-4o" },
        ...(opts.backup ? [{ upstream: "backup", model: "b" }] : []),
      ],
    }],
  };
}

Deno.test("extra headers: literal and env values reach the upstream, from a same-format and a translated client", async () => {
  await using up = startFakeUpstream({ fallback: chatAnswer("ok") });
  await using gw = await startTestGateway(
    route(up.url, { kind: "openai-chat", headers: openRouterHeaders }),
    { env },
  );
  const chat = await gw.openai().chat.completions.create({
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
  }, { headers: { "x-title": "the client's own" } });
  assert.equal(chat.choices[0]?.message.content, "ok");
  const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
  await client.messages.create({
    model: "smart",
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
  });
  assert.equal(up.calls.length, 2);
  for (const call of up.calls) {
    assert.equal(call.headers.get("http-referer"), "https://app.example.com");
    assert.equal(call.headers.get("x-title"), "Example App");
    assert.equal(call.headers.get("x-tenant-token"), "tenant-secret-123");
    assert.equal(call.headers.get("authorization"), "Bearer sk-or-secret");
    assert.equal(call.headers.get("content-type"), "application/json");
  }
});

Deno.test("extra headers: the operator's value wins over a client's forwarded one, never over auth", async () => {
  const answer = { text: ["ok"], usage: { input: 1, output: 1 } };
  await using up = startFakeUpstream({
    fallback: () => ({
      headers: { "content-type": "text/event-stream" },
      body: anthropicFake.streamChunks(answer).map((c) => ({ send: String(c) })),
    }),
  });
  await using gw = await startTestGateway(
    route(up.url, {
      kind: "anthropic",
      headers: { "anthropic-beta": "operator-beta-1", "X-App": "gateway" },
    }),
    { env },
  );
  const res = await postJson(`${gw.url}/v1/messages`, {
    model: "smart",
    max_tokens: 10,
    stream: true,
    messages: [{ role: "user", content: "hi" }],
  }, { "anthropic-beta": "client-beta-2", "x-app": "cli", "x-api-key": "client-key" });
  assert.equal(res.status, 200);
  await res.text();
  const [call] = up.calls;
  assert.equal(call?.headers.get("anthropic-beta"), "operator-beta-1");
  assert.equal(call?.headers.get("x-app"), "gateway");
  assert.equal(call?.headers.get("x-api-key"), "sk-or-secret", "our key, not the client's");
});

Deno.test("extra headers: an unset secret fails that upstream over, naming the variable, not a value", async () => {
  await using up = startFakeUpstream({ fallback: chatAnswer("never") });
  await using backup = startFakeUpstream({ fallback: chatAnswer("from backup") });
  await using gw = await startTestGateway(
    route(up.url, {
      kind: "openai-chat",
      headers: { "X-Proxy-Auth": { env: "UNSET_VAR" } },
      backup: backup.url,
    }),
    { env },
  );
  const chat = await gw.openai().chat.completions.create({
    model: "smart",
    messages: [{ role: "user", content: "hi" }],
  }, { headers: { "x-request-id": "hdr-unset" } });
  assert.equal(chat.choices[0]?.message.content, "from backup");
  assert.equal(up.calls.length, 0);
  const { attempts } = await gw.row("hdr-unset");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [["up", "error"], [
    "backup",
    "success",
  ]]);
  assert.match(
    attempts[0]?.errorMessage ?? "",
    /upstream up: environment variable UNSET_VAR \(header X-Proxy-Auth\) is not set/,
  );
});

Deno.test("extra headers: the config refuses the gateway's own headers, bad names and bad values, at their path", () => {
  const problems = (headers: Record<string, unknown>) => {
    const checked = validateConfig(route("http://127.0.0.1:1", { kind: "openai-chat", headers }));
    return checked.ok ? [] : checked.problems.map((p) => `${p.path}: ${p.message}`);
  };
  assert.deepEqual(problems(openRouterHeaders), []);
  for (
    const name of [
      "Authorization",
      "api-key",
      "X-Goog-Api-Key",
      "x-amz-date",
      "X-Pulsegate-Note",
      "traceparent",
      "Host",
    ]
  ) {
    assert.deepEqual(problems({ [name]: "x" }), [
      `upstreams.0.headers.${name}: is a header the gateway sets itself (auth, framing, tracing): it cannot be replaced`,
    ]);
  }
  assert.match(problems({ "bad name": "x" })[0]!, /must be an HTTP header name/);
  assert.match(
    problems({ "X-A": "line\r\nInjected: yes" })[0]!,
    /headers.X-A: must be printable ASCII/,
  );
  assert.match(
    problems({ "X-A": { env: "PULSEGATE_ADMIN_TOKEN" } })[0]!,
    /may not name a PULSEGATE_ variable/,
  );
  assert.match(problems({ "X-A": "1", "x-a": "2" })[0]!, /listed twice/);
  const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`X-H${i}`, "v"]));
  assert.match(problems(many)[0]!, /at most 32 headers/);
  // Everything a client may never forward is the gateway's own here too.
  for (const name of NEVER_FORWARDED) assert.ok(isGatewayOwnedHeader(name), name);
});
