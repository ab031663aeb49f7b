/**
 * Embeddings end to end (docs/providers.md "Embeddings"): the official `openai` SDK's
 * `embeddings.create` and `@google/genai`'s `embedContent`, unmodified, through the gateway to
 * fakes of each provider that answer only at the exact URL, with the auth and body shape the
 * provider takes; translation between them; failover before content; usage, cost and one row
 * per request; key limits; hostile batches and hostile answers.
 */
import assert from "node:assert/strict";
import { GoogleGenAI } from "@google/genai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import {
  AWS,
  base64Vector,
  bedrockEmbeddings,
  geminiBatchEmbeddings,
  geminiBody,
  jsonScript,
  openAiBody,
  openAiEmbeddings,
  vectorFor,
} from "./fake_upstreams/embeddings_script.ts";

const OPENAI_KEY = "sk-openai-embed-0123";
const GEMINI_KEY = "gemini-embed-key-0123";
const env = {
  OPENAI_KEY,
  GEMINI_KEY,
  AWS_ID: AWS.accessKeyId,
  AWS_SECRET: AWS.secretAccessKey,
};
const OPENAI_MODEL = "text-embedding-3-small";
const GEMINI_MODEL = "gemini-embedding-001";

type Upstreams = ConfigInput["upstreams"];

const openAiUp = (id: string, url: string): Upstreams[number] => ({
  id,
  kind: "openai-chat",
  base_url: `${url}/v1`,
  api_key_env: "OPENAI_KEY",
  prices: { [OPENAI_MODEL]: { input: 0.02, output: 0 } },
});
const geminiUp = (id: string, url: string): Upstreams[number] => ({
  id,
  kind: "gemini",
  base_url: url,
  api_key_env: "GEMINI_KEY",
});
const bedrockUp = (id: string, url: string): Upstreams[number] => ({
  id,
  kind: "bedrock",
  base_url: url,
  region: AWS.region,
  access_key_env: "AWS_ID",
  secret_key_env: "AWS_SECRET",
});

/** One route `embed` over the given upstreams, each with its candidate model. */
function embedConfig(
  upstreams: Upstreams,
  models: string[],
  extra: Partial<ConfigInput> = {},
): ConfigInput {
  return {
    failover: { retries_per_candidate: 0 },
    upstreams,
    routes: [{
      model: "embed",
      candidates: upstreams.map((u, i) => ({ upstream: u.id, model: models[i]! })),
    }],
    ...extra,
  };
}

/** An OpenAI embeddings endpoint at OpenAI's own path, with its bearer key. */
function openAiFake(
  opts: { dims?: number; dimensions?: number; model?: string } = {},
): FakeUpstream {
  return startFakeUpstream({
    fallback: openAiEmbeddings(() => ({
      path: "/v1/embeddings",
      headers: { authorization: `Bearer ${OPENAI_KEY}` },
      body: openAiBody({ model: opts.model ?? OPENAI_MODEL, dimensions: opts.dimensions }),
    }), { dims: opts.dims }),
  });
}

function geminiFake(opts: { dims?: number; dimensions?: number | "any" } = {}): FakeUpstream {
  return startFakeUpstream({
    fallback: geminiBatchEmbeddings(() => ({
      path: `/v1beta/models/${GEMINI_MODEL}:batchEmbedContents`,
      headers: { "x-goog-api-key": GEMINI_KEY },
      absent: ["authorization"],
      body: geminiBody({ model: GEMINI_MODEL, dimensions: opts.dimensions }),
    }), { dims: opts.dims }),
  });
}

function openaiClient(gw: TestGateway, id?: string) {
  return gw.openai({ apiKey: "unused" }).withOptions({
    defaultHeaders: id ? { "x-request-id": id } : {},
  });
}

function genai(gw: TestGateway, id?: string): GoogleGenAI {
  return new GoogleGenAI({
    apiKey: "unused",
    httpOptions: {
      baseUrl: gw.url,
      apiVersion: "v1beta",
      headers: id ? { "x-request-id": id } : {},
    },
  });
}

const f32 = (values: number[]) => Array.from(new Float32Array(values));

Deno.test("openai SDK: embeddings.create, single and batch, float and base64, to an OpenAI upstream", async () => {
  await using up = openAiFake({ dims: 16 });
  await using gw = await startTestGateway(
    embedConfig([openAiUp("oa", up.url)], [OPENAI_MODEL]),
    { env },
  );
  const client = openaiClient(gw, "emb-float");
  // The SDK's default: it asks for base64 and hands back floats.
  const single = await client.embeddings.create({ model: "embed", input: "hello world" });
  assert.equal(single.object, "list");
  assert.deepEqual(single.data[0]?.embedding, f32(vectorFor("hello world", 16)));
  assert.equal(single.data[0]?.index, 0);
  assert.equal(single.model, OPENAI_MODEL);
  assert.deepEqual(single.usage, { prompt_tokens: 3, total_tokens: 3 });

  const texts = ["alpha", "beta beta", "gamma gamma gamma"];
  const batch = await openaiClient(gw, "emb-batch").embeddings.create({
    model: "embed",
    input: texts,
    encoding_format: "float",
  });
  assert.deepEqual(batch.data.map((d) => d.embedding), texts.map((t) => f32(vectorFor(t, 16))));
  assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);

  const b64 = await openaiClient(gw).embeddings.create({
    model: "embed",
    input: ["alpha", "beta beta"],
    encoding_format: "base64",
  });
  assert.deepEqual(
    b64.data.map((d) => d.embedding),
    ["alpha", "beta beta"].map((t) => base64Vector(vectorFor(t, 16))),
  );

  // The upstream was always asked for base64, once per request, with its key.
  assert.equal(up.calls.length, 3);
  assert.deepEqual(up.calls.map((c) => (c.json as { input: unknown }).input), [
    "hello world",
    texts,
    ["alpha", "beta beta"],
  ]);

  const { request, attempts } = await gw.row("emb-batch");
  assert.equal(request.clientFormat, "openai-embeddings");
  assert.equal(request.route, "embed");
  assert.equal(request.status, 200);
  assert.equal(request.outcome, "success");
  assert.equal(request.inputTokens, 2 + 3 + 5);
  assert.equal(request.outputTokens, 0);
  assert.equal(request.tokensEstimated, false);
  assert.equal(request.costUsd, (10 * 0.02) / 1e6);
  assert.equal(attempts.length, 1);
  assert.equal(attempts[0]?.model, OPENAI_MODEL);
  assert.equal(attempts[0]?.costUsd, (10 * 0.02) / 1e6);
});

Deno.test("@google/genai: embedContent, single and batch, to a Gemini upstream (tokens estimated)", async () => {
  await using up = geminiFake({ dims: 12, dimensions: "any" });
  await using gw = await startTestGateway(
    embedConfig([geminiUp("gm", up.url)], [GEMINI_MODEL]),
    { env },
  );
  const one = await genai(gw, "gem-one").models.embedContent({
    model: "embed",
    contents: "What is the meaning of life?",
  });
  assert.deepEqual(one.embeddings?.[0]?.values, vectorFor("What is the meaning of life?", 12));

  const texts = ["first text", "second text", "third"];
  const many = await genai(gw, "gem-batch").models.embedContent({
    model: "embed",
    contents: texts,
    config: { outputDimensionality: 6, taskType: "RETRIEVAL_DOCUMENT" },
  });
  assert.deepEqual(many.embeddings?.map((e) => e.values), texts.map((t) => vectorFor(t, 6)));
  const sent = up.calls.at(-1)?.json as { requests: Record<string, unknown>[] };
  assert.deepEqual(sent.requests.map((r) => r.taskType), texts.map(() => "RETRIEVAL_DOCUMENT"));
  assert.deepEqual(sent.requests.map((r) => r.outputDimensionality), [6, 6, 6]);

  // Gemini reports no tokens for embeddings: the row carries the estimate, flagged.
  const { request, attempts } = await gw.row("gem-batch");
  assert.equal(request.clientFormat, "gemini-embeddings");
  assert.equal(request.inputTokens, Math.ceil(10 / 4) + Math.ceil(11 / 4) + Math.ceil(5 / 4));
  assert.equal(request.tokensEstimated, true);
  assert.equal(attempts[0]?.tokensEstimated, true);

  // The plain REST method, `:embedContent`, under /v1 too.
  const res = await postJson(`${gw.url}/v1/models/embed:embedContent`, {
    content: { parts: [{ text: "plain" }] },
  });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { embedding: { values: vectorFor("plain", 12) } });
});

Deno.test("translation: an OpenAI client to Gemini, Titan and Cohere upstreams, and a Gemini client to OpenAI", async () => {
  await using gem = geminiFake({ dimensions: 8 });
  await using titan = startFakeUpstream({
    fallback: bedrockEmbeddings({ model: "amazon.titan-embed-text-v2:0" }),
  });
  await using cohere = startFakeUpstream({
    fallback: bedrockEmbeddings({ model: "cohere.embed-english-v3", dims: 8 }),
  });
  await using oa = openAiFake({ dims: 8 });
  const config: ConfigInput = {
    failover: { retries_per_candidate: 0 },
    upstreams: [
      geminiUp("gm", gem.url),
      bedrockUp("titan", titan.url),
      bedrockUp("cohere", cohere.url),
      openAiUp("oa", oa.url),
    ],
    routes: [
      { model: "via-gemini", candidates: [{ upstream: "gm", model: GEMINI_MODEL }] },
      {
        model: "via-titan",
        candidates: [{ upstream: "titan", model: "amazon.titan-embed-text-v2:0" }],
      },
      {
        model: "via-cohere",
        candidates: [{ upstream: "cohere", model: "cohere.embed-english-v3" }],
      },
      { model: "via-openai", candidates: [{ upstream: "oa", model: OPENAI_MODEL }] },
    ],
  };
  await using gw = await startTestGateway(config, { env });
  const texts = ["one", "two two", "three three three"];
  const create = (model: string, extra: { dimensions?: number } = {}) =>
    openaiClient(gw, `tr-${model}`).embeddings.create({ model, input: texts, ...extra });

  const fromGemini = await create("via-gemini", { dimensions: 8 });
  assert.deepEqual(fromGemini.data.map((d) => d.embedding), texts.map((t) => vectorFor(t, 8)));
  assert.equal(gem.calls.length, 1);

  const fromTitan = await create("via-titan", { dimensions: 256 });
  assert.deepEqual(
    fromTitan.data.map((d) => d.embedding),
    texts.map((t) => vectorFor(t, 256)),
  );
  // Titan embeds one text a call: three calls, one hop, one row, the tokens summed.
  assert.equal(titan.calls.length, 3);
  assert.deepEqual(
    titan.calls.map((c) => c.json),
    texts.map((t) => ({
      inputText: t,
      dimensions: 256,
    })),
  );
  const titanRow = await gw.row("tr-via-titan");
  assert.equal(titanRow.attempts.length, 1);
  assert.equal(titanRow.request.inputTokens, 1 + 2 + 5);
  assert.equal(titanRow.request.tokensEstimated, false);
  assert.deepEqual(fromTitan.usage, { prompt_tokens: 8, total_tokens: 8 });

  const fromCohere = await create("via-cohere");
  assert.deepEqual(fromCohere.data.map((d) => d.embedding), texts.map((t) => vectorFor(t, 8)));
  assert.deepEqual(cohere.calls.map((c) => c.json), [{
    texts,
    input_type: "search_document",
    embedding_types: ["float"],
  }]);
  assert.equal((await gw.row("tr-via-cohere")).request.tokensEstimated, true);

  // Google's SDK to an OpenAI upstream: base64 from the upstream, floats to the client.
  const back = await genai(gw).models.embedContent({ model: "via-openai", contents: texts });
  assert.deepEqual(back.embeddings?.map((e) => e.values), texts.map((t) => vectorFor(t, 8)));
});

Deno.test("failover before content: a 500, then the next upstream answers; both hops on one row", async () => {
  await using bad = startFakeUpstream({
    fallback: () => jsonScript({ error: { message: "boom", type: "server_error" } }, 500),
  });
  await using good = openAiFake({ dims: 4 });
  await using gw = await startTestGateway(
    embedConfig([openAiUp("bad", bad.url), openAiUp("good", good.url)], [
      OPENAI_MODEL,
      OPENAI_MODEL,
    ]),
    { env },
  );
  const res = await openaiClient(gw, "fo-1").embeddings.create({ model: "embed", input: "x" });
  assert.deepEqual(res.data[0]?.embedding, f32(vectorFor("x", 4)));
  assert.equal(bad.calls.length, 1);
  const { request, attempts } = await gw.row("fo-1");
  assert.equal(request.outcome, "success");
  assert.equal(request.upstream, "good");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome, a.status]), [
    ["bad", "error", 500],
    ["good", "success", 200],
  ]);
  assert.equal(gw.cooldowns.get("bad").consecutiveFailures, 1);
});

Deno.test("candidates that cannot embed are passed over; a route of only those is the caller's 400", async () => {
  await using oa = openAiFake({ dims: 4 });
  await using anth = startFakeUpstream();
  const config: ConfigInput = {
    upstreams: [
      { id: "claude", kind: "anthropic", base_url: anth.url },
      openAiUp("oa", oa.url),
    ],
    routes: [
      {
        model: "embed",
        candidates: [
          { upstream: "claude", model: "claude-x" },
          { upstream: "oa", model: OPENAI_MODEL },
        ],
      },
      { model: "chat-only", candidates: [{ upstream: "claude", model: "claude-x" }] },
    ],
  };
  await using gw = await startTestGateway(config, { env });
  const ok = await openaiClient(gw, "skip-1").embeddings.create({ model: "embed", input: "x" });
  assert.equal(ok.data.length, 1);
  assert.equal(anth.calls.length, 0);
  const { attempts } = await gw.row("skip-1");
  assert.deepEqual(attempts.map((a) => a.upstream), ["oa"]);

  const res = await postJson(`${gw.url}/v1/embeddings`, { model: "chat-only", input: "x" }, {
    "x-request-id": "skip-2",
  });
  assert.equal(res.status, 400);
  assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.unsupported");
  const body = await res.json();
  assert.match(body.error.message, /claude: embeddings \(anthropic has no embeddings API\)/);
  assert.match(body.error.message, /upstream kinds that can: openai-chat, gemini, bedrock/);
  assert.equal((await gw.row("skip-2")).request.status, 400);
});

const TITAN = "amazon.titan-embed-text-v2:0";
const titanPriced = (id: string, url: string): Upstreams[number] => ({
  ...bedrockUp(id, url),
  prices: { [TITAN]: { input: 0.02, output: 0 } },
});

/** A Titan fake whose `n`th call never answers: the hop's calls before it did. */
function titanStallingAt(n: number): FakeUpstream {
  const titan = bedrockEmbeddings({ model: TITAN, dims: 4 });
  const up: FakeUpstream = startFakeUpstream({
    fallback: (call) => up.calls.length === n ? { headerDelay: "never" } : titan(call),
  });
  return up;
}

Deno.test("a hop of several calls: silence on its second call fails over, the first call's tokens stay on its row", async () => {
  await using slow = titanStallingAt(2);
  await using good = startFakeUpstream({
    fallback: bedrockEmbeddings({ model: TITAN, dims: 4 }),
  });
  await using gw = await startTestGateway(
    embedConfig([titanPriced("slow", slow.url), titanPriced("good", good.url)], [TITAN, TITAN], {
      failover: { retries_per_candidate: 0, idle_timeout_secs: 30 },
    }),
    { env },
  );
  const texts = ["one", "two two", "three three three"];
  const res = await openaiClient(gw, "stall-1").embeddings.create({ model: "embed", input: texts });
  assert.deepEqual(res.data.map((d) => d.embedding), texts.map((t) => vectorFor(t, 4)));
  assert.equal(slow.calls.length, 2);
  assert.equal(good.calls.length, 3);
  const { request, attempts } = await gw.row("stall-1");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome, a.inputTokens]), [
    ["slow", "idle_timeout", 1],
    ["good", "success", 8],
  ]);
  assert.equal(request.inputTokens, 8);
  assert.equal(request.costUsd, ((1 + 8) * 0.02) / 1e6);
  await eventually(() => slow.openConnections === 0, { what: "the silent call closed" });
});

Deno.test("a client that leaves mid-hop: one row, 499, its upstream call closed, nothing left in flight", async () => {
  await using up = titanStallingAt(2);
  await using gw = await startTestGateway(
    embedConfig([titanPriced("titan", up.url)], [TITAN]),
    { env },
  );
  const leave = new AbortController();
  const asked = fetch(`${gw.url}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": "gone-1" },
    body: JSON.stringify({ model: "embed", input: ["a", "b", "c"] }),
    signal: leave.signal,
  }).catch(() => null);
  await eventually(() => up.calls.length === 2, { what: "the second call sent" });
  leave.abort();
  await asked;
  const { request, attempts } = await gw.row("gone-1");
  assert.equal(request.status, 499);
  assert.equal(request.errorCode, "gw.client.disconnected");
  assert.deepEqual(attempts.map((a) => [a.outcome, a.inputTokens]), [["client_disconnected", 1]]);
  await eventually(() => up.openConnections === 0, { what: "the upstream call closed" });
  await eventually(() => gw.metrics.inflight === 0, { what: "nothing in flight" });
  const other = await fetch(`${gw.url}/v1/embeddings`);
  assert.equal(other.status, 405);
  assert.equal(other.headers.get("allow"), "POST");
  assert.equal((await other.json()).error.type, "invalid_request_error");
});
