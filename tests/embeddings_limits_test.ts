/**
 * Embeddings under the gateway's limits (docs/providers.md "Embeddings", docs/security.md
 * "Hostile input"): a hostile batch gets a 400 in the client's format and a bounded row and
 * reaches no upstream; a hostile answer (a bomb of vectors, the wrong count or length, values
 * that are not numbers) is the upstream's bad answer and fails over; key limits and guardrails
 * hold for embeddings as for generation; batches are cut to each provider's limit.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { EMBED_LIMITS } from "../gateway/formats/embeddings.ts";
import { eventually, postJson, startTestGateway } from "./harness.ts";
import { type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
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
import { checked } from "./fake_upstreams/cloud_script.ts";

const MODEL = "text-embedding-3-small";
const env = {
  OPENAI_KEY: "sk-embed",
  AWS_ID: AWS.accessKeyId,
  AWS_SECRET: AWS.secretAccessKey,
  GEMINI_KEY: "gm-key",
  KEY_RPM: "pg-rpm",
  KEY_TPM: "pg-tpm",
  KEY_BUDGET: "pg-budget",
  KEY_FLIGHT: "pg-flight",
};

function openAiFake(dims = 4) {
  return startFakeUpstream({
    fallback: openAiEmbeddings(() => ({
      path: "/v1/embeddings",
      headers: { authorization: "Bearer sk-embed" },
      body: openAiBody({ model: MODEL }),
    }), { dims }),
  });
}

function route(urls: string[], extra: Partial<ConfigInput> = {}): ConfigInput {
  return {
    failover: { retries_per_candidate: 0 },
    upstreams: urls.map((url, i) => ({
      id: `up${i + 1}`,
      kind: "openai-chat" as const,
      base_url: `${url}/v1`,
      api_key_env: "OPENAI_KEY",
      prices: { [MODEL]: { input: 100_000, output: 0 } },
    })),
    routes: [{
      model: "embed",
      candidates: urls.map((_, i) => ({ upstream: `up${i + 1}`, model: MODEL })),
    }],
    ...extra,
  };
}

const embed = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  postJson(`${url}/v1/embeddings`, body, headers);

Deno.test("a hostile batch: 400 in OpenAI's shape, a bounded row, no upstream call", async () => {
  await using up = openAiFake();
  await using gw = await startTestGateway(route([up.url]), { env });
  const cases: { name: string; body: unknown; param: string }[] = [
    {
      name: "too many inputs",
      body: { model: "embed", input: Array(EMBED_LIMITS.inputs + 1).fill("x") },
      param: "input",
    },
    {
      name: "too many characters",
      body: { model: "embed", input: Array(3).fill("y".repeat(700_000)) },
      param: "input",
    },
    {
      name: "too many token ids",
      body: { model: "embed", input: [Array(EMBED_LIMITS.tokenIds + 1).fill(1)] },
      param: "input[0]",
    },
    {
      name: "dimensions over the cap",
      body: { model: "embed", input: "x", dimensions: 1e6 },
      param: "dimensions",
    },
    {
      // 8,192,000 values, 31 MiB of float32: each input and the length are within their caps.
      name: "inputs × dimensions over the cap on values",
      body: { model: "embed", input: Array(1000).fill("x"), dimensions: 8192 },
      param: "dimensions",
    },
    {
      name: "a token id that is not one",
      body: { model: "embed", input: [1, -2] },
      param: "input",
    },
    { name: "mixed shapes", body: { model: "embed", input: ["a", [1, 2]] }, param: "input" },
    { name: "an empty input", body: { model: "embed", input: ["a", ""] }, param: "input" },
    { name: "no input", body: { model: "embed", input: [] }, param: "input" },
    {
      name: "an encoding OpenAI lacks",
      body: { model: "embed", input: "x", encoding_format: "int8" },
      param: "encoding_format",
    },
  ];
  for (const [i, c] of cases.entries()) {
    const id = `hostile-${i}`;
    const res = await embed(gw.url, c.body, { "x-request-id": id });
    assert.equal(res.status, 400, c.name);
    assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.invalid_request", c.name);
    const body = await res.json();
    assert.equal(body.error.type, "invalid_request_error", c.name);
    assert.equal(body.error.param, c.param, c.name);
    assert.ok(body.error.message.length < 300, `${c.name}: a bounded message`);
    const { request, attempts } = await gw.row(id);
    assert.equal(request.status, 400, c.name);
    assert.equal(request.failureSource, "client", c.name);
    assert.equal(request.clientFormat, "openai-embeddings", c.name);
    assert.ok((request.errorMessage ?? "").length < 300, `${c.name}: a bounded row`);
    assert.equal(attempts.length, 0, c.name);
  }
  assert.equal(up.calls.length, 0);
  assert.equal(gw.metrics.inflight, 0);
});

Deno.test("a hostile Gemini batch: 400 in Gemini's shape", async () => {
  await using up = openAiFake();
  await using gw = await startTestGateway(route([up.url]), { env });
  const at = (method: string) => `${gw.url}/v1beta/models/embed:${method}`;
  const image = await postJson(at("embedContent"), {
    content: { parts: [{ inlineData: { mimeType: "image/png", data: "AAAA" } }] },
  });
  assert.equal(image.status, 400);
  assert.equal(image.headers.get("x-pulsegate-error-code"), "gw.client.unsupported");
  assert.equal((await image.json()).error.status, "INVALID_ARGUMENT");
  const other = await postJson(at("batchEmbedContents"), {
    requests: [{ model: "models/another", content: { parts: [{ text: "x" }] } }],
  });
  assert.equal(other.status, 400);
  assert.match((await other.json()).error.message, /must be the model in the path/);
  const mixed = await postJson(at("batchEmbedContents"), {
    requests: [
      { model: "models/embed", content: { parts: [{ text: "x" }] }, outputDimensionality: 4 },
      { model: "models/embed", content: { parts: [{ text: "y" }] }, outputDimensionality: 8 },
    ],
  });
  assert.equal(mixed.status, 400);
  const many = await postJson(at("batchEmbedContents"), {
    requests: Array(EMBED_LIMITS.inputs + 1).fill({ content: { parts: [{ text: "x" }] } }),
  });
  assert.equal(many.status, 400);
  // 2,048 requests of 4,096 values: 8,388,608 values, over the cap of 2,048 × 3,072.
  const values = await postJson(at("batchEmbedContents"), {
    requests: Array(EMBED_LIMITS.inputs).fill({
      content: { parts: [{ text: "x" }] },
      outputDimensionality: 4096,
    }),
  });
  assert.equal(values.status, 400);
  assert.equal(values.headers.get("x-pulsegate-error-code"), "gw.client.invalid_request");
  const error = (await values.json()).error;
  assert.equal(error.status, "INVALID_ARGUMENT");
  assert.match(error.message, /at most 6291456 per request/);
  assert.equal(up.calls.length, 0);
});

/** Answers a hostile upstream may send to one input, each a bad answer. */
const HOSTILE: { name: string; script: Script }[] = [
  {
    name: "more vectors than inputs",
    script: jsonScript({ data: [{ embedding: [1] }, { embedding: [2] }], usage: {} }),
  },
  {
    name: "a vector over the cap",
    script: jsonScript({ data: [{ embedding: Array(EMBED_LIMITS.dimensions + 1).fill(0) }] }),
  },
  {
    name: "a base64 vector over the cap",
    script: jsonScript({
      data: [{ embedding: base64Vector(Array(EMBED_LIMITS.dimensions + 1).fill(0.5)) }],
    }),
  },
  { name: "NaN in base64", script: jsonScript({ data: [{ embedding: base64Vector([NaN, 1]) }] }) },
  { name: "partial floats", script: jsonScript({ data: [{ embedding: "AAAAAAA=" }] }) },
  { name: "a string value", script: jsonScript({ data: [{ embedding: ["0.5"] }] }) },
  { name: "an index out of place", script: jsonScript({ data: [{ embedding: [1], index: 7 }] }) },
  { name: "not JSON", script: { body: [{ send: "<html>oops</html>" }] } },
  { name: "an empty vector", script: jsonScript({ data: [{ embedding: [] }] }) },
];

Deno.test("a hostile answer is the upstream's bad answer: the next candidate answers", async () => {
  await using bad = startFakeUpstream();
  await using good = openAiFake(4);
  // Every case charges the bad upstream; none may pause it before the next case is sent to it.
  const failover = { retries_per_candidate: 0, failures_to_pause: 100 };
  await using gw = await startTestGateway(route([bad.url, good.url], { failover }), { env });
  for (const [i, h] of HOSTILE.entries()) {
    bad.enqueue(h.script);
    const id = `bad-answer-${i}`;
    const res = await embed(gw.url, { model: "embed", input: "x" }, { "x-request-id": id });
    assert.equal(res.status, 200, h.name);
    assert.deepEqual((await res.json()).data[0].embedding, vectorFor("x", 4), h.name);
    const { attempts } = await gw.row(id);
    assert.deepEqual(
      attempts.map((a) => [a.upstream, a.outcome, a.errorCode]),
      [["up1", "error", "gw.upstream.bad_response"], ["up2", "success", null]],
      h.name,
    );
  }
  // Different lengths across one request's vectors, and a length other than the one asked for.
  bad.enqueue(jsonScript({ data: [{ embedding: [1, 2] }, { embedding: [1, 2, 3] }] }));
  const ragged = await embed(gw.url, { model: "embed", input: ["a", "b"] });
  assert.equal(ragged.status, 200);
  good.setHandler(openAiEmbeddings(() => ({ path: "/v1/embeddings" }), { dims: 4 }));
  bad.enqueue(jsonScript({ data: [{ embedding: [1, 2, 3] }] }));
  const wrong = await embed(gw.url, { model: "embed", input: "a", dimensions: 2 });
  assert.equal(wrong.status, 200);
  assert.equal((await wrong.json()).data[0].embedding.length, 2);
});

Deno.test("key limits: rpm, tpm, budget and max_in_flight refuse embeddings in OpenAI's shape", async () => {
  await using up = openAiFake(4);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  await using gw = await startTestGateway(
    route([up.url], {
      keys: [
        { id: "rpm", key_env: "KEY_RPM", rpm: 1 },
        { id: "tpm", key_env: "KEY_TPM", tpm: 5 },
        { id: "budget", key_env: "KEY_BUDGET", budget: { usd: 0.5, period: "day" } },
        { id: "flight", key_env: "KEY_FLIGHT", max_in_flight: 1 },
      ],
    }),
    { env },
  );
  const as = (key: string) => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 });
  const refusal = (p: Promise<unknown>) =>
    p.then(() => null, (err: { status?: number; code?: string }) => err);

  await as("pg-rpm").embeddings.create({ model: "embed", input: "x" });
  const rpm = await refusal(as("pg-rpm").embeddings.create({ model: "embed", input: "x" }));
  assert.equal(rpm?.status, 429);
  assert.equal(rpm?.code, "gw.key.rate_limited");

  // 40 characters: 10 tokens billed, over the key's 5 a minute.
  await as("pg-tpm").embeddings.create({ model: "embed", input: "t".repeat(40) });
  const tpm = await refusal(as("pg-tpm").embeddings.create({ model: "embed", input: "x" }));
  assert.equal(tpm?.status, 429);
  assert.equal(tpm?.code, "gw.key.rate_limited");

  // 10 tokens at 100,000 USD per million: 1 USD, over the 0.5 budget.
  await as("pg-budget").embeddings.create({ model: "embed", input: "b".repeat(40) });
  const budget = await refusal(as("pg-budget").embeddings.create({ model: "embed", input: "x" }));
  assert.equal(budget?.status, 429);
  assert.equal(budget?.code, "gw.key.budget_exhausted");

  const answer = { data: [{ embedding: [0.5, 0.25] }], usage: { prompt_tokens: 1 } };
  up.enqueue({ body: [{ until: held }, { send: JSON.stringify(answer) }] });
  const first = embed(gw.url, { model: "embed", input: "x" }, {
    authorization: "Bearer pg-flight",
  });
  await eventually(() => up.calls.length === 4, { what: "the first request at the upstream" });
  const second = await embed(gw.url, { model: "embed", input: "x" }, {
    authorization: "Bearer pg-flight",
  });
  assert.equal(second.status, 429);
  assert.equal(second.headers.get("x-pulsegate-error-code"), "gw.key.max_in_flight");
  await second.body?.cancel();
  release();
  const done = await first;
  assert.equal(done.status, 200);
  assert.deepEqual((await done.json()).data[0].embedding, [0.5, 0.25]);
});

/**
 * A client that has the status line of an answer and reads no further: the gateway holds the
 * answer's vectors meanwhile. 1,024 inputs of 3,072 values are 12 MiB of float32 and 16 MiB of
 * base64 on the wire, more than the sockets between take.
 */
async function unreadAnswer(url: string, key: string): Promise<Deno.TcpConn> {
  const body = JSON.stringify({
    model: "embed",
    input: Array(1024).fill("a"),
    encoding_format: "base64",
  });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(new URL(url).port) });
  const head =
    `POST /v1/embeddings HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${key}\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  await conn.write(new TextEncoder().encode(head + body));
  const start = new Uint8Array(16);
  await conn.read(start);
  assert.match(new TextDecoder().decode(start), /^HTTP\/1\.1 200/);
  return conn;
}

/** 3,072 values as base64, the same for every input: an answer that costs the fake nothing to make. */
const LONG_VECTOR = JSON.stringify(base64Vector(vectorFor("a", 3072)));

Deno.test("an answer the client has not read holds its key's place: max_in_flight bounds the vectors held", async () => {
  await using up = startFakeUpstream({
    fallback: (call) => {
      const input = (call.json as { input: unknown }).input;
      const count = Array.isArray(input) ? input.length : 1;
      const data = Array.from(
        { length: count },
        (_, i) => `{"object":"embedding","index":${i},"embedding":${LONG_VECTOR}}`,
      );
      const usage = `{"prompt_tokens":${count},"total_tokens":${count}}`;
      return {
        headers: { "content-type": "application/json" },
        body: [{ send: `{"object":"list","data":[${data.join(",")}],"usage":${usage}}` }],
      };
    },
  });
  await using gw = await startTestGateway(
    route([up.url], { keys: [{ id: "flight", key_env: "KEY_FLIGHT", max_in_flight: 2 }] }),
    { env },
  );
  const places = async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    return Number(text.match(/^pulsegate_key_in_flight_requests\{key="flight"\} (\d+)/m)?.[1]);
  };
  const held: Deno.TcpConn[] = [];
  try {
    held.push(await unreadAnswer(gw.url, "pg-flight"), await unreadAnswer(gw.url, "pg-flight"));
    assert.equal(await places(), 2);
    // Each answer holds its 1,024 vectors of 3,072 float32 values of the budget, no more.
    assert.equal(await vectorBytes(gw.url), 2 * 1024 * 3072 * 4);
    const third = await embed(gw.url, { model: "embed", input: "x" }, {
      authorization: "Bearer pg-flight",
    });
    assert.equal(third.status, 429);
    assert.equal(third.headers.get("x-pulsegate-error-code"), "gw.key.max_in_flight");
    await third.body?.cancel();
    // A client that leaves gives its place back; one that reads its answer to the end, too.
    held[0]!.close();
    await eventually(async () => (await places()) === 1, { what: "the place of the client gone" });
    assert.equal(await vectorBytes(gw.url), 1024 * 3072 * 4);
    const reader = held[1]!.readable.getReader();
    while (!(await reader.read()).done) { /* the whole answer */ }
    await eventually(async () => (await places()) === 0, { what: "the place of the answer read" });
    assert.equal(await vectorBytes(gw.url), 0);
    const fourth = await embed(gw.url, { model: "embed", input: "x" }, {
      authorization: "Bearer pg-flight",
    });
    assert.equal(fourth.status, 200);
    await fourth.body?.cancel();
  } finally {
    // An answer left unread would hold the gateway's shutdown.
    for (const conn of held) {
      try {
        conn.close();
      } catch { /* closed above */ }
    }
  }
});

Deno.test("guardrails read embedding inputs; token ids, which they cannot read, are unchecked", async () => {
  await using up = openAiFake(4);
  await using gw = await startTestGateway(route([up.url]), { env });
  const put = await fetch(`${gw.url}/admin/api/guardrails`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ enabled: true, rules: [{ id: "secret", pattern: "project-x" }] }),
  });
  assert.equal(put.status, 200);
  const blocked = await embed(gw.url, { model: "embed", input: ["fine", "about project-X"] });
  assert.equal(blocked.status, 400);
  assert.equal(blocked.headers.get("x-pulsegate-error-code"), "guardrail.blocked");
  const gemini = await postJson(`${gw.url}/v1beta/models/embed:batchEmbedContents`, {
    requests: [{ content: { parts: [{ text: "project-x" }] } }],
  });
  assert.equal(gemini.status, 400);
  assert.equal(gemini.headers.get("x-pulsegate-error-code"), "guardrail.blocked");
  const tokens = await embed(gw.url, { model: "embed", input: [[1, 2, 3]] });
  assert.equal(tokens.status, 400);
  assert.equal(tokens.headers.get("x-pulsegate-error-code"), "guardrail.unchecked");
  assert.match((await tokens.json()).error.message, /token ids/);
  assert.equal(up.calls.length, 0);
  const ok = await embed(gw.url, { model: "embed", input: "fine" });
  assert.equal(ok.status, 200);
  await ok.body?.cancel();
});

Deno.test("batches are cut to each provider's limit: Gemini 100 a call, Cohere 96, Titan one", async () => {
  await using gem = startFakeUpstream({
    fallback: geminiBatchEmbeddings(() => ({
      path: "/v1beta/models/gemini-embedding-001:batchEmbedContents",
      body: geminiBody({ model: "gemini-embedding-001" }),
    }), { dims: 3 }),
  });
  await using cohere = startFakeUpstream({
    fallback: bedrockEmbeddings({ model: "cohere.embed-v4:0", dims: 256 }),
  });
  await using titan = startFakeUpstream({
    fallback: bedrockEmbeddings({ model: "amazon.titan-embed-text-v2:0" }),
  });
  const bedrock = (id: string, url: string) => ({
    id,
    kind: "bedrock" as const,
    base_url: url,
    region: AWS.region,
    access_key_env: "AWS_ID",
    secret_key_env: "AWS_SECRET",
  });
  await using gw = await startTestGateway({
    upstreams: [
      { id: "gm", kind: "gemini", base_url: gem.url, api_key_env: "GEMINI_KEY" },
      bedrock("cohere", cohere.url),
      bedrock("titan", titan.url),
    ],
    routes: [
      { model: "gem", candidates: [{ upstream: "gm", model: "gemini-embedding-001" }] },
      { model: "cohere", candidates: [{ upstream: "cohere", model: "cohere.embed-v4:0" }] },
      {
        model: "titan",
        candidates: [{ upstream: "titan", model: "amazon.titan-embed-text-v2:0" }],
      },
    ],
  }, { env });
  const texts = Array.from({ length: 250 }, (_, i) => `text ${i}`);
  const gemRes = await embed(gw.url, { model: "gem", input: texts });
  assert.equal(gemRes.status, 200);
  const gemBody = await gemRes.json();
  assert.deepEqual(
    gemBody.data.map((d: { embedding: number[] }) => d.embedding),
    texts.map((t) => vectorFor(t, 3)),
  );
  assert.deepEqual(gem.calls.map((c) => (c.json as { requests: unknown[] }).requests.length), [
    100,
    100,
    50,
  ]);

  const cohereRes = await embed(gw.url, {
    model: "cohere",
    input: texts.slice(0, 100),
    dimensions: 256,
  });
  assert.equal(cohereRes.status, 200);
  assert.equal((await cohereRes.json()).data.length, 100);
  assert.deepEqual(cohere.calls.map((c) => (c.json as { texts: unknown[] }).texts.length), [96, 4]);
  assert.deepEqual(
    cohere.calls.map((c) => (c.json as { output_dimension?: number }).output_dimension),
    [256, 256],
  );

  // Titan takes one text a call: more inputs than a hop may make calls is not sent at all.
  const titanRes = await embed(gw.url, {
    model: "titan",
    input: Array(EMBED_LIMITS.callsPerHop + 1).fill("t"),
  });
  assert.equal(titanRes.status, 400);
  assert.equal(titanRes.headers.get("x-pulsegate-error-code"), "gw.client.unsupported");
  const titanDims = await embed(gw.url, { model: "titan", input: "t", dimensions: 300 });
  assert.equal(titanDims.status, 400);
  assert.match((await titanDims.json()).error.message, /takes 256, 512, 1024/);
  assert.equal(titan.calls.length, 0);
});

Deno.test("Azure OpenAI: embeddings at the deployment's URL, with the api-key header", async () => {
  await using az = startFakeUpstream({
    fallback: openAiEmbeddings(() => ({
      path: "/openai/deployments/emb-prod/embeddings?api-version=2024-10-21",
      headers: { "api-key": "az-key" },
      absent: ["authorization"],
      body: openAiBody({ model: "emb-prod" }),
    }), { dims: 4 }),
  });
  await using gw = await startTestGateway({
    upstreams: [{
      id: "az",
      kind: "openai-chat",
      base_url: az.url,
      api_key_env: "AZ_KEY",
      azure: { api_version: "2024-10-21" },
    }],
    routes: [{ model: "embed", candidates: [{ upstream: "az", model: "emb-prod" }] }],
  }, { env: { AZ_KEY: "az-key" } });
  const res = await new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    .embeddings.create({ model: "embed", input: ["a", "b"] });
  assert.deepEqual(res.data.map((d) => d.embedding), ["a", "b"].map((t) => vectorFor(t, 4)));
  assert.equal(az.calls.length, 1);
});

Deno.test("an upstream's own 4xx reaches a same-format client as it came, and is not failed over", async () => {
  const refusal = {
    error: {
      message: "This model's maximum context length is 8192 tokens",
      type: "invalid_request_error",
      param: "input",
      code: null,
    },
  };
  await using first = startFakeUpstream({
    fallback: checked(() => ({ path: "/v1/embeddings" }), () => jsonScript(refusal, 400)),
  });
  await using second = openAiFake();
  await using gw = await startTestGateway(route([first.url, second.url]), { env });
  const res = await embed(gw.url, { model: "embed", input: "long" });
  assert.equal(res.status, 400);
  assert.deepEqual(await res.json(), refusal);
  assert.equal(second.calls.length, 0);
});

/** A request's share of the vector budget at the largest: 2,048 inputs of 3,072 float32 values. */
const LARGEST = { model: "embed", input: Array(2048).fill("a"), dimensions: 3072 };

/** The gateway's `pulsegate_embedding_vector_bytes` gauge. */
async function vectorBytes(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(text.match(/^pulsegate_embedding_vector_bytes (\d+)/m)?.[1]);
}

Deno.test("the vector budget: a request past it waits, then 429 in the client's format; every share comes back", async () => {
  await using up = startFakeUpstream();
  // Four of the largest wait at the upstream, each until the test lets it fail (a 500).
  const fail = [0, 1, 2, 3].map(() => Promise.withResolvers<void>());
  for (const { promise } of fail) {
    up.enqueue({ status: 500, body: [{ until: promise }, { send: '{"error":{"message":"x"}}' }] });
  }
  up.enqueue(jsonScript({ data: [{ embedding: base64Vector([0.5, 0.25]) }] }));
  // At the test scale a request waits 2 s for room (the waiter below needs only the few
  // milliseconds a failed hop takes to give its share back), and a held upstream is not given up
  // on for 36 s.
  const failover = { retries_per_candidate: 0, slot_wait_secs: 200, idle_timeout_secs: 3600 };
  await using gw = await startTestGateway(route([up.url], { failover }), { env });
  const send = (path: string, body: unknown, id: string) =>
    fetch(`${gw.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": id },
      body: JSON.stringify(body),
      // A request left waiting for ever fails the test instead of hanging it.
      signal: AbortSignal.timeout(30_000),
    });
  // Four of the largest take the whole budget, 4 × 24 MiB.
  const holders = [0, 1, 2, 3].map((i) => send("/v1/embeddings", LARGEST, `holder-${i}`));
  await eventually(() => up.calls.length === 4, { what: "four requests at the upstream" });
  assert.equal(await vectorBytes(gw.url), 4 * 2048 * 3072 * 4);

  const [openai, gemini] = await Promise.all([
    send("/v1/embeddings", { model: "embed", input: "x" }, "no-room"),
    send("/v1beta/models/embed:embedContent", { content: { parts: [{ text: "x" }] } }, "gm"),
  ]);
  assert.equal(openai.status, 429);
  assert.equal(openai.headers.get("x-pulsegate-error-code"), "gw.embeddings.memory_full");
  assert.equal(openai.headers.get("retry-after"), "1");
  const error = (await openai.json()).error;
  assert.equal(error.type, "rate_limit_error");
  assert.equal(error.code, "gw.embeddings.memory_full");
  assert.equal(gemini.status, 429);
  assert.equal((await gemini.json()).error.status, "RESOURCE_EXHAUSTED");
  const { request, attempts } = await gw.row("no-room");
  assert.equal(request.status, 429);
  assert.equal(request.errorCode, "gw.embeddings.memory_full");
  assert.equal(attempts.length, 0);
  assert.equal(up.calls.length, 4, "a request refused for room reaches no upstream");

  // One waits; a holder's upstream fails, its share comes back, and the waiter goes on.
  const waiter = send("/v1/embeddings", { model: "embed", input: "x" }, "waiter");
  await new Promise((r) => setTimeout(r, 50));
  fail[0]!.resolve();
  const done = await waiter;
  assert.equal(done.status, 200);
  assert.deepEqual((await done.json()).data[0].embedding, [0.5, 0.25]);
  const first = await holders[0]!;
  assert.equal(first.status, 504);
  await first.body?.cancel();
  for (const { resolve } of fail) resolve();
  for (const res of await Promise.all(holders.slice(1))) {
    assert.equal(res.status, 504);
    await res.body?.cancel();
  }
  await eventually(async () => (await vectorBytes(gw.url)) === 0, {
    what: "every share of the budget given back",
  });
  assert.equal(gw.metrics.inflight, 0);
});

/** Answers a last candidate may send to `{input: ["a", "b"], dimensions: 2}`: each a bad answer. */
const LAST_WORDS: { name: string; script: Script; code: string }[] = [
  {
    name: "the wrong length",
    script: jsonScript({ data: [{ embedding: [1, 2, 3] }, { embedding: [1, 2, 3] }] }),
    code: "gw.upstream.bad_response",
  },
  {
    name: "NaN",
    script: jsonScript({
      data: [{ embedding: base64Vector([NaN, 1]) }, { embedding: base64Vector([1, 1]) }],
    }),
    code: "gw.upstream.bad_response",
  },
  {
    // Larger than any answer to two inputs of two values could be: cut at the call's cap.
    name: "a vector over the cap",
    script: jsonScript({
      data: [{ embedding: Array(EMBED_LIMITS.dimensions + 1).fill(0) }, { embedding: [1, 1] }],
    }),
    code: "gw.upstream.oversized",
  },
];

Deno.test("a bad answer from the last candidate is a 502 in the client's format, not a timeout", async () => {
  await using up = startFakeUpstream();
  const failover = { retries_per_candidate: 0, failures_to_pause: 100 };
  await using gw = await startTestGateway(route([up.url], { failover }), { env });
  const gemini = (method: string) => `${gw.url}/v1beta/models/embed:${method}`;
  const text = (t: string) => ({ content: { parts: [{ text: t }] }, outputDimensionality: 2 });
  const clients = [
    {
      name: "OpenAI",
      send: (id: string) =>
        embed(gw.url, { model: "embed", input: ["a", "b"], dimensions: 2 }, { "x-request-id": id }),
      words: (error: Record<string, unknown>) => error.type,
      said: "server_error",
    },
    {
      name: "Gemini batchEmbedContents",
      send: (id: string) =>
        postJson(gemini("batchEmbedContents"), { requests: [text("a"), text("b")] }, {
          "x-request-id": id,
        }),
      words: (error: Record<string, unknown>) => error.status,
      said: "UNAVAILABLE",
    },
  ];
  for (const client of clients) {
    for (const [i, bad] of LAST_WORDS.entries()) {
      const what = `${client.name}, ${bad.name}`;
      up.enqueue(bad.script);
      const id = `${client.name.split(" ")[0]}-${i}`;
      const res = await client.send(id);
      assert.equal(res.status, 502, what);
      assert.equal(res.headers.get("x-pulsegate-error-code"), bad.code, what);
      assert.equal(client.words((await res.json()).error), client.said, what);
      const { request } = await gw.row(id);
      assert.equal(request.status, 502, what);
      assert.equal(request.errorCode, bad.code, what);
    }
  }
  // embedContent, no length asked: a vector over the gateway's cap.
  up.enqueue(jsonScript({ data: [{ embedding: Array(EMBED_LIMITS.dimensions + 1).fill(0) }] }));
  const one = await postJson(gemini("embedContent"), { content: { parts: [{ text: "a" }] } });
  assert.equal(one.status, 502);
  assert.equal(one.headers.get("x-pulsegate-error-code"), "gw.upstream.bad_response");
  assert.equal((await one.json()).error.status, "UNAVAILABLE");
  assert.equal(up.calls.length, 2 * LAST_WORDS.length + 1);
});
