/**
 * Embedding vectors on the wire (docs/providers.md "Embeddings"): OpenAI's base64 is the
 * float32 values little-endian; answers are written a few vectors at a time; an OpenAI call
 * holds as many inputs as fit the answer cap.
 */
import assert from "node:assert/strict";
import { base64Of, floatsText, vectorBody, vectorOf } from "./embedding_vectors.ts";
import { answerCap, EMBED_LIMITS, type EmbedRequest, VectorTally } from "./embeddings.ts";
import { openAiEmbedUpstream } from "./openai_chat/embeddings.ts";
import { UPSTREAM_CAPS } from "./upstream_caps.ts";

const opts = { upstream: "up" };

Deno.test("base64 is float32 little-endian, both ways", () => {
  // 1.0 is 0x3f800000: little-endian bytes 00 00 80 3f; -2.0 is 0xc0000000.
  assert.equal(base64Of(new Float32Array([1, -2])), btoa("\x00\x00\x80\x3f\x00\x00\x00\xc0"));
  assert.deepEqual(
    Array.from(vectorOf(btoa("\x00\x00\x80\x3f\x00\x00\x00\xc0"), opts)),
    [1, -2],
  );
  const values = [0.1, -0.25, 3.5e-8, 12345.678];
  const back = vectorOf(base64Of(new Float32Array(values)), opts);
  assert.deepEqual(Array.from(back), Array.from(new Float32Array(values)));
});

Deno.test("floats are written exactly: a client's doubles read the float32 values", () => {
  const vector = new Float32Array([0.1, -0.8291015625, 1e-7]);
  assert.deepEqual(JSON.parse(floatsText(vector)), Array.from(vector));
});

Deno.test("a vector that is not one is a bad answer", () => {
  for (const bad of [{}, "not base64!", btoa("abc"), [1, "2"], [Infinity], 5]) {
    assert.throws(() => vectorOf(bad, opts), { code: "gw.upstream.bad_response" });
  }
  assert.throws(
    () => vectorOf(new Array(EMBED_LIMITS.dimensions + 1).fill(0), opts),
    { code: "gw.upstream.bad_response" },
  );
});

Deno.test("an answer's body is the vectors, written a step at a time", async () => {
  const vectors = Array.from({ length: 40 }, (_, i) => new Float32Array(1000).fill(i / 4));
  const body = vectorBody(vectors, {
    head: "[",
    item: (v, i) => JSON.stringify({ i, first: v[0] }),
    tail: "]",
  });
  const chunks = await Array.fromAsync(body);
  assert.ok(chunks.length >= 4, `${chunks.length} steps`);
  const text = await new Response(ReadableStream.from(chunks)).text();
  assert.deepEqual(JSON.parse(text), vectors.map((v, i) => ({ i, first: v[0] })));
});

Deno.test("an OpenAI call holds as many inputs as fit the answer cap, at the length seen", () => {
  const req = (dimensions?: number): EmbedRequest => ({
    model: "r",
    inputs: [],
    encoding: "float",
    chars: 0,
    tokenIds: 0,
    dimensions,
  });
  const size = (r: EmbedRequest, seen?: number) =>
    openAiEmbedUpstream.batchSize(r, { model: "m", seen });
  const base64Bytes = (dims: number, n: number) => n * (4 * Math.ceil((dims * 4) / 3) + 96);
  // Unknown length: sized for the longest vector the gateway takes.
  const first = size(req());
  assert.ok(base64Bytes(EMBED_LIMITS.dimensions, first) <= UPSTREAM_CAPS.answerBytes);
  assert.ok(base64Bytes(EMBED_LIMITS.dimensions, first + 1) > UPSTREAM_CAPS.answerBytes - 4096);
  // Once a call answered 1,536 values a vector, the rest of a full batch fits one call.
  assert.equal(size(req(), 1536), EMBED_LIMITS.inputs);
  assert.equal(size(req(1536)), EMBED_LIMITS.inputs);
  assert.ok(size(req(3072)) < EMBED_LIMITS.inputs);
});

const request = (inputs: number, dimensions?: number): EmbedRequest => ({
  model: "r",
  inputs: Array.from({ length: inputs }, () => ({ text: "a" })),
  encoding: "float",
  chars: inputs,
  tokenIds: 0,
  dimensions,
});

Deno.test("a request's vectors stay under the cap on values: the first vector too long for all the inputs ends the hop", () => {
  const one = { count: 1, upstream: "up" };
  // 2,048 inputs at 4,096 values are 8,388,608, over 2,048 × 3,072: known at the first vector.
  const tally = new VectorTally(request(2048));
  assert.throws(() => tally.add({ vectors: [new Float32Array(4096)] }, one), {
    code: "gw.upstream.bad_response",
    message: /4096 values: 2048 inputs would be over the gateway's cap of 6291456 values/,
  });
  const fits = new VectorTally(request(2048));
  fits.add({ vectors: [new Float32Array(3072)] }, one);
  assert.equal(fits.bytes, 3072 * 4);
  // 1,536 inputs of an open model's 4,096 values fit.
  new VectorTally(request(1536)).add({ vectors: [new Float32Array(4096)] }, one);
});

Deno.test("a call's answer may be no larger than any answer to its inputs could be", () => {
  const inputs = request(10).inputs;
  // Ten vectors of 1,024 values as pretty-printed JSON numbers, twice over (Titan's two copies).
  assert.ok(answerCap(inputs, { length: 1024 }) >= 10 * 2 * 1024 * 34);
  assert.ok(answerCap(inputs, { length: 1024 }) < 1024 * 1024);
  // Never more than a whole answer of any kind.
  assert.equal(answerCap(request(2048).inputs, { length: 3072 }), UPSTREAM_CAPS.answerBytes);
});
