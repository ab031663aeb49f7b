import assert from "node:assert/strict";
import * as genaiLatest from "@google/genai";
import * as genaiCli from "@google/genai-gemini-cli";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { streamText } from "ai";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import { OPENING_HOLD_MS } from "../../gateway/forward/stream_forward.ts";
import { contentThenSilence, silentAfterHeaders } from "../fake_upstreams/openai_chat_script.ts";
import * as geminiFake from "../fake_upstreams/gemini_script.ts";
import type { Handler, Script } from "../fake_upstreams/server.ts";

/**
 * docs/design.md "Client API": after the early 200 (the 15 s opening hold passed) a failure
 * must reach a Gemini client as an error Google's SDK raises, with the HTTP status as `code`
 * and the gateway's code inside. A whole gateway in virtual time (tests/virtual_gateway.ts)
 * at the real defaults: the 200 at 15 s exactly, the idle timeout's error at 300 s exactly.
 */
const IDLE_MS = 300_000;

function oneCandidate(kind: "gemini" | "openai-chat", url: string): ConfigInput {
  return {
    upstreams: [{ id: "only", kind, base_url: url }],
    routes: [{ model: "smart", candidates: [{ upstream: "only", model: "real" }] }],
  };
}

/** A gateway in virtual time over one in-process upstream answering with `handler`. */
async function oneUpstream(
  kind: "gemini" | "openai-chat",
  handler: Handler,
): Promise<VirtualGateway> {
  const v = await startVirtualGateway({ config: ([url]) => oneCandidate(kind, url!) });
  v.ups[0]!.setHandler(handler);
  return v;
}

/**
 * The SDKs that must raise it: the current one, and the one Gemini CLI
 * bundles (0.61 pins 1.30.0), which reads an error only from a network
 * chunk that is the bare error object (docs/architecture.md).
 */
const SDKS = [
  { name: "@google/genai 3.3.0", sdk: genaiLatest },
  { name: "@google/genai 1.30.0 (Gemini CLI)", sdk: genaiCli },
];
type Sdk = (typeof SDKS)[number]["sdk"];

/**
 * Streams one answer through an SDK, in virtual time: what it yielded, what it threw (and at
 * which virtual ms from the start), and the statuses the gateway answered it with the ms each
 * came at (1.30 has no fetch option, so the global fetch is swapped for the gateway's while it
 * runs, and put back). The client hangs up at the end: an SDK that raised the error leaves the
 * rest of the answer unread.
 */
async function streamThroughSdk(sdk: Sdk, opts: { v: VirtualGateway; requestId: string }) {
  const { v } = opts;
  const ai = new sdk.GoogleGenAI({
    apiKey: "unused",
    httpOptions: {
      baseUrl: v.url,
      apiVersion: "v1beta",
      headers: { "x-request-id": opts.requestId },
    },
  });
  const startedAt = v.clock.sinceStart;
  const client = v.client();
  const statuses: [status: number, at: number][] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!url.startsWith(v.url)) return await realFetch(input, init);
    const res = await client.fetch(input, init);
    statuses.push([res.status, v.clock.sinceStart - startedAt]);
    return res;
  };
  const seen: (string | undefined)[] = [];
  try {
    const thrown: unknown = await v.run(
      (async () => {
        const stream = await ai.models.generateContentStream({ model: "smart", contents: "hi" });
        for await (const chunk of stream) seen.push(chunk.text);
      })().then(() => undefined, (e) => e),
    );
    return { seen, thrown, statuses, endedAt: v.clock.sinceStart - startedAt };
  } finally {
    globalThis.fetch = realFetch;
    client.hangUp();
  }
}

const silentGemini: Script = {
  headers: { "content-type": "text/event-stream" },
  body: [{ hang: true }],
};

for (const { name, sdk } of SDKS) {
  Deno.test(`gemini SSE (${name}): silence after the early 200 is raised as ApiError 504 with our code`, async () => {
    await using v = await oneUpstream("gemini", () => silentGemini);
    const { seen, thrown, statuses, endedAt } = await streamThroughSdk(sdk, {
      v,
      requestId: "gem-silent",
    });
    assert.deepEqual(statuses, [[200, OPENING_HOLD_MS]], "the error came after the early 200");
    assert.equal(endedAt, IDLE_MS, "given up on at 300 s of silence");
    assert.deepEqual(seen, []);
    assert.ok(thrown instanceof sdk.ApiError, `not an ApiError: ${thrown}`);
    assert.equal(thrown.status, 504);
    assert.match(thrown.message, /DEADLINE_EXCEEDED/);
    assert.match(thrown.message, /gw\.upstream\.idle_timeout"/);
    const { request } = await v.row("gem-silent");
    assert.equal(request.errorCode, "gw.upstream.idle_timeout");
    assert.equal(request.status, 504);
  });

  Deno.test(`gemini SSE (${name}): a stall after content is raised after the text, with the mid-stream code`, async () => {
    // A translated stream this time: the error is the encoder's, not an upstream's bytes.
    await using v = await oneUpstream("openai-chat", () => contentThenSilence("partial"));
    const { seen, thrown, statuses, endedAt } = await streamThroughSdk(sdk, {
      v,
      requestId: "gem-stall",
    });
    assert.deepEqual(statuses, [[200, 0]]);
    assert.equal(endedAt, IDLE_MS);
    assert.deepEqual(seen, ["partial"]);
    assert.ok(thrown instanceof sdk.ApiError, `not an ApiError: ${thrown}`);
    assert.equal(thrown.status, 504);
    assert.match(thrown.message, /gw\.upstream\.idle_timeout_mid_stream/);
    const { request } = await v.row("gem-stall");
    assert.equal(request.errorCode, "gw.upstream.idle_timeout_mid_stream");
  });
}

Deno.test("gemini SSE: the error's bytes are the bare google.rpc error object, then the same as a data event", async () => {
  await using v = await oneUpstream("openai-chat", () => silentAfterHeaders);
  const res = await v.send(
    "/v1beta/models/smart:streamGenerateContent?alt=sse",
    { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
    { headers: { "x-request-id": "gem-bytes" } },
  );
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/event-stream");
  assert.equal(res.headersAt, OPENING_HOLD_MS);
  // Both blocks at the instant of the idle timeout, nothing before it.
  assert.deepEqual([...new Set(res.pieces.map((p) => p.at))], [IDLE_MS]);
  const text = res.text;
  // First as Google sends it (no SSE field: up to 2.30 the SDK raises only that), then as an
  // SSE event, the one form a strict SSE reader sees.
  const [bare, event, ...rest] = text.split("\n\n");
  assert.deepEqual(rest, [""], `two blocks: ${JSON.stringify(text)}`);
  assert.doesNotMatch(bare!, /^data:/m);
  assert.ok(event!.startsWith("data: ") && !event!.includes("\n"));
  const body = JSON.parse(bare!);
  assert.deepEqual(JSON.parse(event!.slice("data: ".length)), body);
  assert.equal(body.error.code, 504);
  assert.equal(body.error.status, "DEADLINE_EXCEEDED");
  assert.equal(body.error.details[0].reason, "gw.upstream.idle_timeout");
});

/**
 * The Vercel AI SDK's Google provider reads the body as strict SSE (eventsource-parser): a line
 * that is not an SSE field is skipped, so the bare object alone ended the stream "interrupted",
 * with no error. It must raise the error after the text, with our status and code.
 */
async function streamThroughAiSdk(v: VirtualGateway) {
  const google = createGoogleGenerativeAI({
    baseURL: `${v.url}/v1beta`,
    apiKey: "unused",
    fetch: v.fetch,
  });
  const result = streamText({ model: google("smart"), prompt: "hi", onError: () => {} });
  const text: string[] = [];
  const errors: unknown[] = [];
  const finishes: string[] = [];
  for await (const part of result.fullStream) {
    if (part.type === "text-delta") text.push(part.text);
    if (part.type === "error") errors.push(part.error);
    if (part.type === "finish") finishes.push(part.finishReason);
  }
  return { text, errors, finishes };
}

function assertAiSdkError(error: unknown, opts: { status: number; code: string }) {
  assert.ok(error instanceof Error, `not an Error: ${error}`);
  const raised = error as Error & { statusCode?: number; data?: unknown };
  assert.equal(raised.statusCode, opts.status);
  const data = raised.data as { details?: { reason?: string }[] } | undefined;
  assert.equal(data?.details?.[0]?.reason, opts.code);
}

Deno.test("gemini SSE (Vercel AI SDK): a stall after content is raised after the text", async () => {
  await using v = await oneUpstream("openai-chat", () => contentThenSilence("partial"));
  const { text, errors, finishes } = await v.run(streamThroughAiSdk(v));
  assert.deepEqual(text, ["partial"]);
  assert.equal(errors.length, 1, "one error, not a silent end");
  assertAiSdkError(errors[0], { status: 504, code: "gw.upstream.idle_timeout_mid_stream" });
  assert.deepEqual(finishes, ["error"]);
  assert.equal(v.clock.sinceStart, IDLE_MS, "at 300 s of silence");
});

Deno.test("gemini SSE (Vercel AI SDK): silence after the early 200 is raised", async () => {
  await using v = await oneUpstream("gemini", () => silentGemini);
  const { text, errors, finishes } = await v.run(streamThroughAiSdk(v));
  assert.deepEqual(text, []);
  assert.equal(errors.length, 1);
  assertAiSdkError(errors[0], { status: 504, code: "gw.upstream.idle_timeout" });
  assert.deepEqual(finishes, ["error"]);
  assert.equal(v.clock.sinceStart, IDLE_MS, "at 300 s of silence");
});

Deno.test("gemini JSON array: a stall after content ends the array with the same error object", async () => {
  const chunks = geminiFake.streamChunks({
    text: ["partial", "never"],
    usage: { input: 1, output: 2 },
  });
  await using v = await oneUpstream("gemini", () => ({
    headers: { "content-type": "text/event-stream" },
    body: [{ send: chunks[0]! }, { hang: true }],
  }));
  const res = await v.send(
    "/v1beta/models/smart:streamGenerateContent",
    { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
  );
  assert.equal(res.status, 200);
  assert.equal(res.endedAt, IDLE_MS);
  const items = JSON.parse(res.text);
  assert.equal(items.length, 2);
  assert.equal(items[0].candidates[0].content.parts[0].text, "partial");
  assert.equal(items[1].error.code, 504);
  assert.equal(items[1].error.status, "DEADLINE_EXCEEDED");
  assert.equal(items[1].error.details[0].reason, "gw.upstream.idle_timeout_mid_stream");
});

Deno.test("gemini upstream: Google's bare in-stream error fails over before content", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: ([broken, good]) => ({
      failover: { retries_per_candidate: 0 },
      upstreams: [
        { id: "broken", kind: "gemini", base_url: broken! },
        { id: "good", kind: "gemini", base_url: good! },
      ],
      routes: [{
        model: "smart",
        candidates: [{ upstream: "broken", model: "g1" }, { upstream: "good", model: "g2" }],
      }],
    }),
  });
  v.ups[0]!.setHandler(() => ({
    headers: { "content-type": "text/event-stream" },
    body: [{ send: geminiFake.errorChunk(503, "The model is overloaded.") }],
  }));
  v.ups[1]!.setHandler(() => ({
    headers: { "content-type": "text/event-stream" },
    body: geminiFake.streamChunks({ text: ["fine"], usage: { input: 1, output: 1 } })
      .map((c) => ({ send: c })),
  }));
  const { seen, thrown, endedAt } = await streamThroughSdk(genaiCli, {
    v,
    requestId: "gem-failover",
  });
  assert.equal(thrown, undefined);
  assert.deepEqual(seen, ["fine"]);
  assert.equal(endedAt, 0, "failed over at once");
  const { attempts } = await v.row("gem-failover");
  assert.deepEqual(attempts.map((a) => [a.upstream, a.outcome]), [
    ["broken", "error"],
    ["good", "success"],
  ]);
  assert.match(attempts[0]?.errorMessage ?? "", /overloaded/);
});
