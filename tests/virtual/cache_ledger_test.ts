/**
 * docs/observability.md "Cache tokens", end to end: each upstream kind's fake reports cache reads
 * and writes in its own fields; the rows, the cost, the metric and the client's answer (in
 * another vocabulary than the upstream's) must carry them. The prices and the expected USD are
 * those of the hand-computed table in tests/cache_cost_test.ts. A whole gateway in virtual time
 * (tests/virtual_gateway.ts).
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import type { Price } from "../../gateway/config/limits_schema.ts";
import type { UpstreamKind } from "../../gateway/runtime/wire_kinds.ts";
import { startVirtualGateway } from "../virtual_gateway.ts";
import type { Script } from "../fake_upstreams/server.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import * as geminiFake from "../fake_upstreams/gemini_script.ts";
import { bedrockStreamChunks } from "../fake_upstreams/bedrock_script.ts";
import { chatStream } from "../fake_upstreams/openai_chat_script.ts";
import { responsesStreamChunks } from "../fake_upstreams/openai_responses_script.ts";

const CLAUDE_USAGE = {
  input: 1000,
  output: 500,
  cacheRead: 20_000,
  cacheWrite: 5000,
  cacheWrite1h: 2000,
};
const OPENAI_USAGE = { input: 26_000, output: 500, cached: 20_000, cacheWrite: 5000 };

const sse = (chunks: (string | Uint8Array)[], type = "text/event-stream"): Script => ({
  headers: { "content-type": type },
  body: chunks.map((send) => ({ send })),
});

interface Case {
  kind: UpstreamKind;
  model: string;
  price: Price;
  script: Script;
  /** The client that asks: another vocabulary than the upstream's. */
  client: "anthropic" | "openai-chat";
  expect: { cached: number; write: number; write1h: number | null; usd: number; writeUsd: number };
}

const CASES: Case[] = [
  {
    kind: "anthropic",
    model: "claude-sonnet-4-5",
    price: { input: 3, output: 15 },
    script: sse(anthropicFake.streamChunks({ text: ["ok"], usage: CLAUDE_USAGE })),
    client: "openai-chat",
    expect: { cached: 20_000, write: 5000, write1h: 2000, usd: 0.03975, writeUsd: 0.02325 },
  },
  {
    kind: "bedrock",
    model: "anthropic.claude-sonnet-4-5-20250929-v1:0",
    price: { input: 3, output: 15 },
    script: sse(
      bedrockStreamChunks({ text: ["ok"], usage: CLAUDE_USAGE }),
      "application/vnd.amazon.eventstream",
    ),
    client: "anthropic",
    expect: { cached: 20_000, write: 5000, write1h: 2000, usd: 0.03975, writeUsd: 0.02325 },
  },
  {
    kind: "openai-chat",
    model: "gpt-5",
    price: { input: 1.25, output: 10, cached_input: 0.125 },
    script: chatStream({ text: ["ok"], usage: OPENAI_USAGE }),
    client: "anthropic",
    expect: { cached: 20_000, write: 5000, write1h: null, usd: 0.015, writeUsd: 0.00625 },
  },
  {
    kind: "openai-responses",
    model: "gpt-5",
    price: { input: 1.25, output: 10, cached_input: 0.125, cache_write: 1.5 },
    script: sse(responsesStreamChunks({ text: ["ok"], usage: OPENAI_USAGE })),
    client: "anthropic",
    expect: { cached: 20_000, write: 5000, write1h: null, usd: 0.01625, writeUsd: 0.0075 },
  },
  {
    kind: "gemini",
    model: "gemini-2.5-pro",
    price: { input: 1.25, output: 10, cached_input: 0.31 },
    script: sse(geminiFake.streamChunks({
      text: ["ok"],
      usage: { input: 26_000, output: 500, cached: 20_000, thoughts: 100 },
    })),
    client: "anthropic",
    expect: { cached: 20_000, write: 0, write1h: null, usd: 0.0187, writeUsd: 0 },
  },
];

const AWS_ENV = { AWS_AK: "AKIDEXAMPLE", AWS_SK: "test-secret" };

function configFor(c: Case, url: string): ConfigInput {
  const upstream = c.kind === "bedrock"
    ? {
      id: "u",
      kind: "bedrock" as const,
      base_url: url,
      region: "us-east-1",
      access_key_env: "AWS_AK",
      secret_key_env: "AWS_SK",
    }
    : { id: "u", kind: c.kind, base_url: url };
  return {
    upstreams: [{ ...upstream, prices: { [c.model]: c.price } }],
    routes: [{ model: "smart", candidates: [{ upstream: "u", model: c.model }] }],
  };
}

const close = (actual: number | null | undefined, expected: number, what: string) =>
  assert.ok(Math.abs((actual ?? NaN) - expected) < 1e-12, `${what}: ${actual} != ${expected}`);

for (const c of CASES) {
  Deno.test(`cache ledger end to end: ${c.kind} upstream, ${c.client} client`, async () => {
    await using v = await startVirtualGateway({
      config: ([url]) => configFor(c, url!),
      env: AWS_ENV,
      cryptoHoldsTime: true,
    });
    v.ups[0]!.setHandler(() => c.script);
    const messages = [{ role: "user", content: "hi" }];
    const res = c.client === "anthropic"
      ? await v.send("/v1/messages", { model: "smart", max_tokens: 100, stream: true, messages })
      : await v.send("/v1/chat/completions", {
        model: "smart",
        stream: true,
        stream_options: { include_usage: true },
        messages,
      });
    assert.equal(res.status, 200);
    const text = res.text;
    const { request, attempts } = await v.row(res.headers.get("x-request-id")!);
    const [hop] = attempts;
    const { expect } = c;
    for (const row of [request, hop!]) {
      assert.equal(row.inputTokens, 26_000, "every input token, the cache's included");
      assert.equal(row.outputTokens, 500);
      assert.equal(row.cachedTokens, expect.cached);
      assert.equal(row.cacheWriteTokens, c.kind === "gemini" ? null : expect.write);
      assert.equal(row.cacheWrite1hTokens, expect.write1h);
      close(row.costUsd, expect.usd, "cost");
      close(row.cacheWriteUsd, expect.writeUsd, "cache write cost");
    }
    // The answer speaks the client's own words for the same numbers.
    if (c.client === "anthropic") {
      const delta = text.split("\n").filter((l) => l.startsWith("data: "))
        .map((l) => JSON.parse(l.slice(6))).find((e) => e.type === "message_delta");
      assert.equal(delta.usage.input_tokens, 26_000 - expect.cached - expect.write);
      assert.equal(delta.usage.cache_read_input_tokens, expect.cached);
      assert.equal(delta.usage.cache_creation_input_tokens, expect.write);
    } else {
      const usage = text.split("\n").filter((l) => l.startsWith("data: {"))
        .map((l) => JSON.parse(l.slice(6))).find((e) => e.usage)?.usage;
      assert.deepEqual(usage.prompt_tokens_details, {
        cached_tokens: expect.cached,
        cache_write_tokens: expect.write,
      });
    }
    const metrics = (await v.send("/metrics", undefined, { method: "GET" })).text;
    assert.match(
      metrics,
      new RegExp(`pulsegate_cache_tokens_total\\{upstream="u",op="read"\\} ${expect.cached}`),
    );
    if (expect.write1h) {
      assert.match(metrics, /pulsegate_cache_tokens_total\{upstream="u",op="write_1h"\} 2000/);
      assert.match(metrics, /pulsegate_cache_tokens_total\{upstream="u",op="write_5m"\} 3000/);
    }
  });
}
