/**
 * Features the IR cannot carry, end to end (docs/design.md "Client API"): a same-format upstream
 * is sent the client's body unchanged, a candidate that would need a
 * translation is skipped without an attempt, and a route with no candidate
 * left refuses in the client's format. Structured output is translated.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { postJson, startTestGateway, type TestGateway } from "./harness.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import * as geminiFake from "./fake_upstreams/gemini_script.ts";
import { chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { responsesWholeBody } from "./fake_upstreams/openai_responses_script.ts";
import { type FakeUpstream, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";

type Kind = "openai-chat" | "openai-responses" | "anthropic" | "gemini" | "bedrock";

const USAGE = { input: 3, output: 2 };

/** Each kind's fake, answering a whole or streamed "Hello". */
const ANSWERS: Record<Kind, (stream: boolean) => Script> = {
  "openai-chat": (stream) =>
    stream ? chatStream({ text: ["Hel", "lo"], usage: USAGE }) : chatWhole({
      text: ["Hello"],
      usage: USAGE,
    }),
  "openai-responses": () => ({
    body: [{ send: responsesWholeBody({ text: ["Hello"], usage: USAGE }) }],
  }),
  "anthropic": (stream) => ({
    headers: { "content-type": stream ? "text/event-stream" : "application/json" },
    body:
      (stream
        ? anthropicFake.streamChunks({ text: ["Hel", "lo"], usage: USAGE })
        : [anthropicFake.wholeBody({ text: ["Hello"], usage: USAGE })]).map((send) => ({ send })),
  }),
  "gemini": (stream) => ({
    headers: { "content-type": stream ? "text/event-stream" : "application/json" },
    body:
      (stream
        ? geminiFake.streamChunks({ text: ["Hel", "lo"], usage: USAGE })
        : [geminiFake.wholeBody({ text: ["Hello"], usage: USAGE })]).map((send) => ({ send })),
  }),
  "bedrock": () => ({ status: 500, body: [{ send: "a bedrock candidate must not be called" }] }),
};

interface Fixture {
  gw: TestGateway;
  /** Fakes by upstream id, in route order. */
  ups: Record<string, FakeUpstream>;
  close(): Promise<void>;
}

/** A gateway with one route, `smart`, over one fake upstream per kind given, in that order. */
async function route(kinds: Kind[]): Promise<Fixture> {
  const ups: Record<string, FakeUpstream> = {};
  const upstreams: ConfigInput["upstreams"] = kinds.map((kind) => {
    const id = kind;
    const up = startFakeUpstream({
      fallback: (call) =>
        ANSWERS[kind](
          (call.json as { stream?: boolean })?.stream === true ||
            call.path.includes(":streamGenerateContent"),
        ),
    });
    ups[id] = up;
    return kind === "bedrock"
      ? {
        id,
        kind,
        base_url: up.url,
        region: "us-east-1",
        access_key_env: "AWS_AK",
        secret_key_env: "AWS_SK",
      }
      : { id, kind, base_url: up.url };
  });
  const gw = await startTestGateway({
    upstreams,
    routes: [{
      model: "smart",
      candidates: kinds.map((kind) => ({ upstream: kind, model: `${kind}-model` })),
    }],
  }, { env: { AWS_AK: "AKIDEXAMPLE", AWS_SK: "secret" } });
  return {
    gw,
    ups,
    async close() {
      await gw.stop();
      for (const up of Object.values(ups)) await up.close();
    },
  };
}

/** An Anthropic request with a document block: nothing but Anthropic can carry it. */
const withDocument = {
  model: "smart",
  max_tokens: 64,
  // Keys in an unusual order, and a hint no translation keeps, to prove the body is not rebuilt.
  top_k: 3,
  messages: [{
    role: "user",
    content: [
      {
        type: "document",
        source: { type: "text", media_type: "text/plain", data: "Pulsegate is a gateway." },
        citations: { enabled: true },
      },
      { type: "text", text: "Summarise the document." },
    ],
  }],
};

Deno.test("native: an Anthropic document on an Anthropic route passes through byte for byte", async () => {
  const f = await route(["anthropic"]);
  try {
    const sent = JSON.stringify(withDocument);
    const res = await postJson(`${f.gw.url}/v1/messages`, sent);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).content[0].text, "Hello");
    const calls = f.ups["anthropic"]!.calls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.body, JSON.stringify({ ...withDocument, model: "anthropic-model" }));
  } finally {
    await f.close();
  }
});

for (const stream of [false, true]) {
  const how = stream ? "streamed" : "whole";
  Deno.test(`native: a candidate that would translate is skipped, not tried (${how})`, async () => {
    const f = await route(["openai-chat", "anthropic"]);
    try {
      const body = { ...withDocument, stream };
      const res = await postJson(`${f.gw.url}/v1/messages`, body);
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, stream ? /"text":"lo"/ : /"text":"Hello"/);
      assert.equal(f.ups["openai-chat"]!.calls.length, 0);
      assert.equal(f.ups["anthropic"]!.calls.length, 1);
      assert.deepEqual(f.ups["anthropic"]!.calls[0]!.json, { ...body, model: "anthropic-model" });
      const { request, attempts } = await f.gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.status, 200);
      assert.deepEqual(attempts.map((a) => a.upstream), ["anthropic"]);
      assert.equal(f.gw.cooldowns.get("openai-chat").consecutiveFailures, 0);
      assert.equal(f.gw.cooldowns.isPaused("openai-chat"), false);
    } finally {
      await f.close();
    }
  });

  Deno.test(`native: no candidate can take it: 400 in Anthropic's format (${how})`, async () => {
    const f = await route(["openai-chat"]);
    try {
      const res = await postJson(`${f.gw.url}/v1/messages`, { ...withDocument, stream });
      assert.equal(res.status, 400);
      assert.equal(res.headers.get("x-pulsegate-error"), "client");
      const body = await res.json();
      assert.equal(body.type, "error");
      assert.equal(body.error.type, "invalid_request_error");
      assert.equal(body.error.details.error_code, "gw.client.unsupported");
      assert.match(body.error.message, /'document' content block/);
      assert.match(body.error.message, /messages\[0\]\.content\[0\]\.type/);
      assert.match(body.error.message, /upstream kinds that can: anthropic$/);
      assert.equal(f.ups["openai-chat"]!.calls.length, 0);
      const { request, attempts } = await f.gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.status, 400);
      assert.equal(request.errorCode, "gw.client.unsupported");
      assert.deepEqual(attempts, []);
    } finally {
      await f.close();
    }
  });
}

Deno.test("native: an image URL skips a Bedrock candidate and is served by the next", async () => {
  const f = await route(["bedrock", "openai-chat"]);
  try {
    const res = await postJson(`${f.gw.url}/v1/messages`, {
      model: "smart",
      max_tokens: 64,
      messages: [{
        role: "user",
        content: [
          { type: "image", source: { type: "url", url: "https://example.com/cat.png" } },
          { type: "text", text: "What is this?" },
        ],
      }],
    });
    assert.equal(res.status, 200);
    assert.equal(f.ups["bedrock"]!.calls.length, 0);
    const sent = f.ups["openai-chat"]!.calls[0]!.json as { messages: { content: unknown }[] };
    assert.deepEqual(sent.messages[0]!.content, [
      { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
      { type: "text", text: "What is this?" },
    ]);
    const { attempts } = await f.gw.row(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((a) => a.upstream), ["openai-chat"]);
  } finally {
    await f.close();
  }
});

Deno.test("native: a Gemini JSON-array stream on a Gemini route sends the body unchanged", async () => {
  const f = await route(["gemini"]);
  try {
    const body = {
      contents: [{ role: "user", parts: [{ text: "news today?" }] }],
      tools: [{ googleSearch: {} }],
      generationConfig: { topK: 4 },
    };
    // No `alt=sse`: the answer is re-encoded as a JSON array, yet the request needs no translation.
    const res = await postJson(`${f.gw.url}/v1beta/models/smart:streamGenerateContent`, body);
    assert.equal(res.status, 200);
    const chunks = await res.json() as {
      candidates: { content: { parts: { text: string }[] } }[];
    }[];
    const text = chunks.map((c) => c.candidates?.[0]?.content.parts[0]?.text ?? "").join("");
    assert.equal(text, "Hello");
    const call = f.ups["gemini"]!.calls[0]!;
    assert.equal(call.body, JSON.stringify(body));
    assert.match(call.path, /gemini-model:streamGenerateContent\?alt=sse$/);
  } finally {
    await f.close();
  }
});

const schema = {
  type: "object",
  properties: { city: { type: "string" }, celsius: { type: "number" } },
  required: ["city", "celsius"],
  additionalProperties: false,
};

const chatWithSchema = {
  model: "smart",
  messages: [{ role: "user", content: "Weather in Paris as JSON" }],
  response_format: {
    type: "json_schema",
    json_schema: { name: "weather", schema, strict: true },
  },
};

Deno.test("structured output: a Chat response_format reaches Gemini as JSON mode + schema", async () => {
  const f = await route(["gemini"]);
  try {
    const res = await postJson(`${f.gw.url}/v1/chat/completions`, chatWithSchema);
    assert.equal(res.status, 200);
    const sent = f.ups["gemini"]!.calls[0]!.json as { generationConfig: Record<string, unknown> };
    assert.deepEqual(sent.generationConfig, {
      responseMimeType: "application/json",
      responseJsonSchema: schema,
    });
  } finally {
    await f.close();
  }
});

Deno.test("structured output: a Chat response_format reaches Responses as text.format", async () => {
  const f = await route(["openai-responses"]);
  try {
    const res = await postJson(`${f.gw.url}/v1/chat/completions`, chatWithSchema);
    assert.equal(res.status, 200);
    const sent = f.ups["openai-responses"]!.calls[0]!.json as { text: unknown };
    assert.deepEqual(sent.text, {
      format: { type: "json_schema", name: "weather", schema, strict: true },
    });
  } finally {
    await f.close();
  }
});

Deno.test("structured output: JSON mode skips Anthropic and Bedrock, which need a schema", async () => {
  const f = await route(["anthropic", "bedrock", "gemini"]);
  try {
    const res = await postJson(`${f.gw.url}/v1/chat/completions`, {
      ...chatWithSchema,
      response_format: { type: "json_object" },
    });
    assert.equal(res.status, 200);
    assert.equal(f.ups["anthropic"]!.calls.length, 0);
    assert.equal(f.ups["bedrock"]!.calls.length, 0);
    const sent = f.ups["gemini"]!.calls[0]!.json as { generationConfig: Record<string, unknown> };
    assert.deepEqual(sent.generationConfig, { responseMimeType: "application/json" });
  } finally {
    await f.close();
  }
});

Deno.test("structured output: refused when only schema-bound kinds are left", async () => {
  const f = await route(["anthropic"]);
  try {
    const res = await postJson(`${f.gw.url}/v1/chat/completions`, {
      ...chatWithSchema,
      response_format: { type: "json_object" },
    });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error.code, "gw.client.unsupported");
    assert.match(body.error.message, /anthropic: JSON mode without a schema/);
    assert.match(body.error.message, /openai-chat, openai-responses, gemini, gemini-interactions$/);
    assert.equal(f.ups["anthropic"]!.calls.length, 0);
  } finally {
    await f.close();
  }
});
