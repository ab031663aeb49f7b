import assert from "node:assert/strict";
import type { Price } from "../gateway/config/limits_schema.ts";
import type { IrUsage } from "../gateway/formats/ir.ts";
import { anthropicClient, anthropicUpstream } from "../gateway/formats/anthropic/mod.ts";
import { bedrockUpstream } from "../gateway/formats/bedrock/mod.ts";
import { geminiClient, geminiUpstream } from "../gateway/formats/gemini/mod.ts";
import { chatClient, chatUpstream } from "../gateway/formats/openai_chat/mod.ts";
import { responsesClient, responsesUpstream } from "../gateway/formats/openai_responses/mod.ts";
import { hopCost, ratesFor } from "../gateway/live/billing.ts";
import type { UpstreamKind } from "../gateway/runtime/wire_kinds.ts";
import type { UpstreamAdapter } from "../gateway/formats/format.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { bedrockWholeBody } from "./fake_upstreams/bedrock_script.ts";
import * as geminiFake from "./fake_upstreams/gemini_script.ts";
import { chatWholeBody } from "./fake_upstreams/openai_chat_script.ts";
import { responsesWholeBody } from "./fake_upstreams/openai_responses_script.ts";

/**
 * docs/observability.md "Cache tokens": every kind's cache fields read into the one IR usage and
 * priced by hand. The same prompt each time: 1,000 tokens read fresh, 20,000 read from the
 * cache, 5,000 written to it (2,000 of them for an hour, where the kind says), 500 out.
 */

const SONNET: Price = { input: 3, output: 15 }; // Claude's cache prices by its rule
const GPT: Price = { input: 1.25, output: 10, cached_input: 0.125 };
const GEMINI: Price = { input: 1.25, output: 10, cached_input: 0.31 };
const NOVA: Price = { input: 0.8, output: 3.2, cached_input: 0.2 };

interface Row {
  kind: UpstreamKind;
  model: string;
  price: Price;
  /** The provider's answer as the fake upstream writes it. */
  body: string;
  usage: IrUsage;
  /** Hand-computed: USD per million times tokens, summed. */
  usd: number;
  cacheWriteUsd: number;
}

const M = 1_000_000;

const TABLE: Row[] = [
  {
    // input_tokens leaves out the cache: 1,000 + 20,000 read + 5,000 written = 26,000.
    kind: "anthropic",
    model: "claude-sonnet-4-5",
    price: SONNET,
    body: anthropicFake.wholeBody({
      text: ["ok"],
      usage: { input: 1000, output: 500, cacheRead: 20_000, cacheWrite: 5000, cacheWrite1h: 2000 },
    }),
    usage: {
      inputTokens: 26_000,
      outputTokens: 500,
      cachedTokens: 20_000,
      cacheWriteTokens: 5000,
      cacheWrite1hTokens: 2000,
      reasoningTokens: undefined,
    },
    // 1,000 x 3 + 20,000 x 0.30 + 3,000 x 3.75 + 2,000 x 6 + 500 x 15
    usd: (1000 * 3 + 20_000 * 0.3 + 3000 * 3.75 + 2000 * 6 + 500 * 15) / M, // 0.03975
    cacheWriteUsd: (3000 * 3.75 + 2000 * 6) / M, // 0.02325
  },
  {
    // Bedrock's inputTokens also leaves out cacheRead/WriteInputTokens; cacheDetails splits ttl.
    kind: "bedrock",
    model: "anthropic.claude-sonnet-4-5-20250929-v1:0",
    price: SONNET,
    body: bedrockWholeBody({
      text: ["ok"],
      usage: { input: 1000, output: 500, cacheRead: 20_000, cacheWrite: 5000, cacheWrite1h: 2000 },
    }),
    usage: {
      inputTokens: 26_000,
      outputTokens: 500,
      cachedTokens: 20_000,
      cacheWriteTokens: 5000,
      cacheWrite1hTokens: 2000,
    },
    usd: 0.03975,
    cacheWriteUsd: 0.02325,
  },
  {
    // A Bedrock model outside Claude: writes at input, reads at the configured cached_input.
    kind: "bedrock",
    model: "amazon.nova-pro-v1:0",
    price: NOVA,
    body: bedrockWholeBody({
      text: ["ok"],
      usage: { input: 1000, output: 500, cacheRead: 20_000, cacheWrite: 5000 },
    }),
    usage: {
      inputTokens: 26_000,
      outputTokens: 500,
      cachedTokens: 20_000,
      cacheWriteTokens: 5000,
    },
    // 1,000 x 0.8 + 20,000 x 0.2 + 5,000 x 0.8 + 500 x 3.2
    usd: (1000 * 0.8 + 20_000 * 0.2 + 5000 * 0.8 + 500 * 3.2) / M, // 0.0104
    cacheWriteUsd: (5000 * 0.8) / M,
  },
  {
    // prompt_tokens counts everything; cached_tokens and cache_write_tokens are parts of it.
    kind: "openai-chat",
    model: "gpt-5",
    price: GPT,
    body: chatWholeBody({
      text: ["ok"],
      usage: { input: 26_000, output: 500, cached: 20_000, cacheWrite: 5000 },
    }),
    usage: {
      inputTokens: 26_000,
      outputTokens: 500,
      cachedTokens: 20_000,
      cacheWriteTokens: 5000,
      reasoningTokens: undefined,
    },
    // 1,000 x 1.25 + 20,000 x 0.125 + 5,000 x 1.25 (no cache_write price: input) + 500 x 10
    usd: (1000 * 1.25 + 20_000 * 0.125 + 5000 * 1.25 + 500 * 10) / M, // 0.015
    cacheWriteUsd: (5000 * 1.25) / M,
  },
  {
    kind: "openai-responses",
    model: "gpt-5",
    price: { ...GPT, cache_write: 1.5 },
    body: responsesWholeBody({
      text: ["ok"],
      usage: { input: 26_000, output: 500, cached: 20_000, cacheWrite: 5000 },
    }),
    usage: {
      inputTokens: 26_000,
      outputTokens: 500,
      cachedTokens: 20_000,
      cacheWriteTokens: 5000,
      reasoningTokens: 0,
    },
    // As Chat, with the configured cache_write of 1.50: 1,250 + 2,500 + 7,500 + 5,000
    usd: (1000 * 1.25 + 20_000 * 0.125 + 5000 * 1.5 + 500 * 10) / M, // 0.01625
    cacheWriteUsd: (5000 * 1.5) / M,
  },
  {
    // promptTokenCount includes cachedContentTokenCount; Gemini reports no cache writes.
    kind: "gemini",
    model: "gemini-2.5-pro",
    price: GEMINI,
    body: geminiFake.wholeBody({
      text: ["ok"],
      usage: { input: 26_000, output: 500, cached: 20_000, thoughts: 100 },
    }),
    usage: {
      inputTokens: 26_000,
      outputTokens: 500,
      cachedTokens: 20_000,
      reasoningTokens: 100,
    },
    // 6,000 x 1.25 + 20,000 x 0.31 + 500 x 10
    usd: (6000 * 1.25 + 20_000 * 0.31 + 500 * 10) / M, // 0.0187
    cacheWriteUsd: 0,
  },
];

const ADAPTERS: Partial<Record<UpstreamKind, UpstreamAdapter>> = {
  anthropic: anthropicUpstream,
  bedrock: bedrockUpstream,
  "openai-chat": chatUpstream,
  "openai-responses": responsesUpstream,
  gemini: geminiUpstream,
};

const close = (actual: number | undefined, expected: number, what: string) =>
  assert.ok(Math.abs((actual ?? NaN) - expected) < 1e-12, `${what}: ${actual} != ${expected}`);

for (const row of TABLE) {
  Deno.test(`cache ledger: ${row.kind} ${row.model} reads and prices its cache fields`, () => {
    const usage = ADAPTERS[row.kind]!.decodeWhole(row.body).usage;
    assert.deepEqual(usage, row.usage);
    const cost = hopCost(ratesFor(row.price, { kind: row.kind, model: row.model }), {
      input: usage.inputTokens ?? null,
      output: usage.outputTokens ?? null,
      cached: usage.cachedTokens ?? null,
      cacheWrite: usage.cacheWriteTokens ?? null,
      cacheWrite1h: usage.cacheWrite1hTokens ?? null,
    });
    close(cost?.usd, row.usd, "usd");
    close(cost?.cacheWriteUsd, row.cacheWriteUsd, "cache write usd");
  });
}

Deno.test("cache prices: the config's own prices win over the provider's rule", () => {
  const rates = ratesFor({ input: 3, output: 15, cached_input: 0.5, cache_write: 4 }, {
    kind: "anthropic",
    model: "claude-sonnet-4-5",
  });
  assert.deepEqual(rates, { input: 3, output: 15, cacheRead: 0.5, cacheWrite: 4, cacheWrite1h: 6 });
  const gemini = ratesFor({ input: 2, output: 1 }, { kind: "gemini", model: "g" });
  assert.deepEqual(gemini, { input: 2, output: 1, cacheRead: 2, cacheWrite: 2, cacheWrite1h: 2 });
  // An upstream that reports more cache than input is cut to its input: never a negative price.
  const cut = hopCost(rates, {
    input: 100,
    output: 0,
    cached: 80,
    cacheWrite: 50,
    cacheWrite1h: 90,
  });
  close(cut?.usd, (80 * 0.5 + 20 * 6) / M, "cut");
});

/** An Anthropic upstream's usage, as each client vocabulary reports it. */
Deno.test("cache fields in every client vocabulary", () => {
  const usage = TABLE[0]!.usage;
  const res = { id: "r", model: "m", content: [], finish: "stop" as const, usage };
  const anthropic = anthropicClient.encodeWhole(res) as { usage: Record<string, unknown> };
  assert.deepEqual(anthropic.usage, {
    input_tokens: 1000,
    output_tokens: 500,
    cache_creation_input_tokens: 5000,
    cache_read_input_tokens: 20_000,
    cache_creation: { ephemeral_5m_input_tokens: 3000, ephemeral_1h_input_tokens: 2000 },
  });
  const chat = chatClient.encodeWhole(res) as { usage: Record<string, unknown> };
  assert.deepEqual(chat.usage, {
    prompt_tokens: 26_000,
    completion_tokens: 500,
    total_tokens: 26_500,
    prompt_tokens_details: { cached_tokens: 20_000, cache_write_tokens: 5000 },
  });
  const responses = responsesClient.encodeWhole(res) as { usage: Record<string, unknown> };
  assert.deepEqual(responses.usage, {
    input_tokens: 26_000,
    input_tokens_details: { cached_tokens: 20_000, cache_write_tokens: 5000 },
    output_tokens: 500,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 26_500,
  });
  const gemini = geminiClient.encodeWhole(res) as { usageMetadata: Record<string, unknown> };
  // Gemini has no word for a cache write: it stays inside promptTokenCount.
  assert.deepEqual(gemini.usageMetadata, {
    promptTokenCount: 26_000,
    candidatesTokenCount: 500,
    totalTokenCount: 26_500,
    cachedContentTokenCount: 20_000,
  });
});
