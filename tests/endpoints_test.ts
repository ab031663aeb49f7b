import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { getRequest } from "../db/history_queries.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { type TestGateway, withGateway } from "./harness.ts";
import { type FakeUpstream, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
import { errorBody } from "./fake_upstreams/anthropic_script.ts";

type Kind = "anthropic" | "gemini" | "openai-chat";

/** The model each kind of candidate is sent, so a test can see it was swapped in. */
const UPSTREAM_MODEL: Record<Kind, string> = {
  "anthropic": "claude-x",
  "gemini": "gemini-x",
  "openai-chat": "gpt-x",
};

const ENV = { UP_KEY: "sk-upstream", KEY_SMART: "pg-smart", KEY_OTHER: "pg-other" };

/** Routes `smart` and `other` over one upstream of `kind`, and a switched-off `off`. */
function config(kind: Kind, url: string, opts: { keys?: ConfigInput["keys"] } = {}): ConfigInput {
  const candidates = [{ upstream: "up", model: UPSTREAM_MODEL[kind] }];
  return {
    upstreams: [{ id: "up", kind, base_url: url, api_key_env: "UP_KEY" }],
    routes: [
      { model: "smart", candidates },
      { model: "other", candidates },
      { model: "off", candidates, enabled: false },
    ],
    keys: opts.keys,
  };
}

const json = (value: unknown): Script => ({ body: [{ send: JSON.stringify(value) }] });

/** A fake upstream whose counter answers `answer`; anything else it is sent is a test failure. */
function counterUpstream(path: RegExp, answer: Script): FakeUpstream {
  return startFakeUpstream({
    fallback: (call) =>
      path.test(call.path) ? answer : { status: 599, body: [{ send: "unexpected" }] },
  });
}

/** A gateway whose one route is served by `upstream` as a `kind` upstream; closes both. */
function withKind(
  kind: Kind,
  upstream: FakeUpstream,
  run: (gw: TestGateway) => Promise<void>,
  opts: { keys?: ConfigInput["keys"]; scale?: number } = {},
): Promise<void> {
  return withGateway(async (gw) => {
    try {
      await run(gw);
    } finally {
      await upstream.close();
    }
  }, {
    upstreams: 0,
    config: () => config(kind, upstream.url, opts),
    env: ENV,
    // Real time unless asked: the 10 s token-counter deadline would be 100 ms at the test
    // scale, shorter than a counter's round trip may take (the answer would be an estimate).
    scale: opts.scale ?? 1,
  });
}

const anthropic = (gw: TestGateway, apiKey = "unused") =>
  new Anthropic({ baseURL: gw.url, apiKey, maxRetries: 0 });

const genai = (gw: TestGateway, opts: { apiKey?: string; apiVersion?: string } = {}) =>
  new GoogleGenAI({
    apiKey: opts.apiKey ?? "unused",
    httpOptions: { baseUrl: gw.url, apiVersion: opts.apiVersion ?? "v1beta" },
  });

const COUNT_PARAMS = {
  model: "smart",
  system: "Be brief.",
  messages: [{ role: "user" as const, content: "How many tokens is this?" }],
};
/** The documented estimate: ceil(characters / 4) over "Be brief." (9) and the message (24). */
const COUNT_PARAMS_ESTIMATE = Math.ceil((9 + 24) / 4);

/** A count writes no history row (docs/architecture.md). */
async function assertNoRow(gw: TestGateway, requestId: string | null): Promise<void> {
  assert.ok(requestId, "the count answer carries x-request-id");
  await gw.writer.flush();
  assert.equal(await getRequest(gw.db, requestId), null);
}

// ------------------------------------------------------------ Anthropic count_tokens

Deno.test("count_tokens: a same-format Anthropic upstream's counter answers, model swapped", async () => {
  const upstream = counterUpstream(/^\/v1\/messages\/count_tokens$/, json({ input_tokens: 42 }));
  await withKind("anthropic", upstream, async (gw) => {
    const { data, response } = await anthropic(gw).messages.countTokens(COUNT_PARAMS)
      .withResponse();
    assert.equal(data.input_tokens, 42);
    assert.equal(response.headers.get("x-pulsegate-token-count"), "upstream");
    assert.equal(upstream.calls.length, 1);
    const [call] = upstream.calls;
    assert.equal(call?.method, "POST");
    assert.equal(call?.path, "/v1/messages/count_tokens");
    assert.deepEqual(call?.json, { ...COUNT_PARAMS, model: "claude-x" });
    assert.equal(call?.headers.get("x-api-key"), "sk-upstream");
    assert.equal(call?.headers.get("anthropic-version"), "2023-06-01");
    await assertNoRow(gw, response.headers.get("x-request-id"));
  });
});

Deno.test("count_tokens: an openai-chat route has no counter, so the answer is estimated", async () => {
  const upstream = startFakeUpstream();
  await withKind("openai-chat", upstream, async (gw) => {
    const { data, response } = await anthropic(gw).messages.countTokens(COUNT_PARAMS)
      .withResponse();
    assert.equal(data.input_tokens, COUNT_PARAMS_ESTIMATE);
    assert.equal(response.headers.get("x-pulsegate-token-count"), "estimated");
    assert.equal(upstream.calls.length, 0);
  });
});

Deno.test("count_tokens: the estimate counts tools by name, description and schema", async () => {
  const upstream = startFakeUpstream();
  await withKind("openai-chat", upstream, async (gw) => {
    const schema = { type: "object" as const, properties: { city: { type: "string" } } };
    const data = await anthropic(gw).messages.countTokens({
      ...COUNT_PARAMS,
      tools: [{ name: "get_weather", description: "Weather now", input_schema: schema }],
    });
    const toolChars = "get_weather".length + "Weather now".length + JSON.stringify(schema).length;
    assert.equal(data.input_tokens, Math.ceil((9 + 24 + toolChars) / 4));
  });
});

Deno.test("count_tokens: a failing counter falls back to the estimate", async () => {
  const upstream = counterUpstream(/count_tokens/, {
    status: 500,
    body: [{ send: errorBody(500, "counter down") }],
  });
  await withKind("anthropic", upstream, async (gw) => {
    const { data, response } = await anthropic(gw).messages.countTokens(COUNT_PARAMS)
      .withResponse();
    assert.equal(data.input_tokens, COUNT_PARAMS_ESTIMATE);
    assert.equal(response.headers.get("x-pulsegate-token-count"), "estimated");
    assert.equal(upstream.calls.length, 1, "asked once: a count does not retry or fail over");
  });
});

Deno.test("count_tokens: a counter that hangs is dropped after 10 s (scaled) for the estimate", async () => {
  const upstream = counterUpstream(/count_tokens/, { headerDelay: "never" });
  await withKind("anthropic", upstream, async (gw) => {
    const started = performance.now();
    const { data, response } = await anthropic(gw).messages.countTokens(COUNT_PARAMS)
      .withResponse();
    // 10 s at this scale is 2 s, time for a real round trip. The bound is far below the SDK's
    // own 10 min timeout and still catches a deadline of a minute.
    assert.ok(performance.now() - started < 10_000);
    assert.equal(data.input_tokens, COUNT_PARAMS_ESTIMATE);
    assert.equal(response.headers.get("x-pulsegate-token-count"), "estimated");
    assert.equal(await upstream.calls[0]?.closed, "cancelled", "the connection was closed");
  }, { scale: 0.2 });
});

Deno.test("count_tokens: a Gemini route is asked through its countTokens, translated", async () => {
  const upstream = counterUpstream(/:countTokens$/, json({ totalTokens: 77 }));
  await withKind("gemini", upstream, async (gw) => {
    const { data, response } = await anthropic(gw).messages.countTokens(COUNT_PARAMS)
      .withResponse();
    assert.equal(data.input_tokens, 77);
    assert.equal(response.headers.get("x-pulsegate-token-count"), "upstream");
    const [call] = upstream.calls;
    assert.equal(call?.path, "/v1beta/models/gemini-x:countTokens");
    assert.equal(call?.headers.get("x-goog-api-key"), "sk-upstream");
    assert.deepEqual(call?.json, {
      generateContentRequest: {
        model: "models/gemini-x",
        contents: [{ role: "user", parts: [{ text: "How many tokens is this?" }] }],
        systemInstruction: { parts: [{ text: "Be brief." }] },
      },
    });
  });
});

Deno.test("count_tokens is admitted like a request: key, key's routes, known model", async () => {
  const upstream = counterUpstream(/count_tokens/, json({ input_tokens: 5 }));
  const keys = [
    { id: "smart-only", key_env: "KEY_SMART", routes: ["smart"] },
    { id: "other-only", key_env: "KEY_OTHER", routes: ["other"] },
  ];
  await withKind("anthropic", upstream, async (gw) => {
    await assert.rejects(
      anthropic(gw, "wrong").messages.countTokens(COUNT_PARAMS),
      (err) => err instanceof Anthropic.AuthenticationError && err.status === 401,
    );
    await assert.rejects(
      anthropic(gw, "pg-other").messages.countTokens(COUNT_PARAMS),
      // A route the key may not use is answered as one that does not exist (docs/security.md).
      (err) => err instanceof Anthropic.NotFoundError && /'smart' is not a route/.test(err.message),
    );
    await assert.rejects(
      anthropic(gw, "pg-smart").messages.countTokens({ ...COUNT_PARAMS, model: "off" }),
      (err) => err instanceof Anthropic.NotFoundError && /'off' is not a route/.test(err.message),
    );
    await assert.rejects(
      genai(gw, { apiKey: "wrong" }).models.countTokens({ model: "smart", contents: "hi" }),
      (err) => err instanceof ApiError && err.status === 401 && /UNAUTHENTICATED/.test(err.message),
    );
    assert.equal(upstream.calls.length, 0, "nothing refused reached the upstream");
    const ok = await anthropic(gw, "pg-smart").messages.countTokens(COUNT_PARAMS);
    assert.equal(ok.input_tokens, 5);
  }, { keys });
});

// ------------------------------------------------------------ Gemini countTokens

Deno.test("countTokens: a Gemini upstream's answer is passed back as it came", async () => {
  const answer = {
    totalTokens: 12,
    cachedContentTokenCount: 3,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: 12 }],
  };
  const upstream = counterUpstream(/:countTokens$/, json(answer));
  await withKind("gemini", upstream, async (gw) => {
    const res = await genai(gw).models.countTokens({ model: "smart", contents: "hello there" });
    assert.equal(res.totalTokens, 12);
    assert.equal(res.cachedContentTokenCount, 3);
    assert.equal(res.sdkHttpResponse?.headers?.["x-pulsegate-token-count"], "upstream");
    const [call] = upstream.calls;
    assert.equal(call?.path, "/v1beta/models/gemini-x:countTokens");
    assert.deepEqual(call?.json, {
      contents: [{ role: "user", parts: [{ text: "hello there" }] }],
    });
  });
});

Deno.test("countTokens: a generateContentRequest body gets the upstream's model inside", async () => {
  const upstream = counterUpstream(/:countTokens$/, json({ totalTokens: 8 }));
  await withKind("gemini", upstream, async (gw) => {
    const generateContentRequest = {
      model: "models/smart",
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      systemInstruction: { parts: [{ text: "Be brief." }] },
    };
    const res = await fetch(`${gw.url}/v1beta/models/smart:countTokens`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ generateContentRequest }),
    });
    assert.deepEqual(await res.json(), { totalTokens: 8 });
    assert.deepEqual(upstream.calls[0]?.json, {
      generateContentRequest: { ...generateContentRequest, model: "models/gemini-x" },
    });
  });
});

Deno.test("countTokens: an Anthropic route is asked through count_tokens, translated", async () => {
  const upstream = counterUpstream(/^\/v1\/messages\/count_tokens$/, json({ input_tokens: 9 }));
  await withKind("anthropic", upstream, async (gw) => {
    const res = await genai(gw).models.countTokens({ model: "smart", contents: "hello there" });
    assert.equal(res.totalTokens, 9);
    assert.equal(res.sdkHttpResponse?.headers?.["x-pulsegate-token-count"], "upstream");
    // Only what count_tokens takes: no max_tokens or other generation settings.
    assert.deepEqual(upstream.calls[0]?.json, {
      model: "claude-x",
      messages: [{ role: "user", content: [{ type: "text", text: "hello there" }] }],
    });
  });
});

Deno.test("countTokens: an openai-chat route is estimated, under /v1 as under /v1beta", async () => {
  const upstream = startFakeUpstream();
  await withKind("openai-chat", upstream, async (gw) => {
    for (const apiVersion of ["v1beta", "v1"]) {
      const res = await genai(gw, { apiVersion }).models.countTokens({
        model: "smart",
        contents: "hello there, gateway",
      });
      assert.equal(res.totalTokens, Math.ceil("hello there, gateway".length / 4), apiVersion);
      assert.equal(res.sdkHttpResponse?.headers?.["x-pulsegate-token-count"], "estimated");
    }
    assert.equal(upstream.calls.length, 0);
  });
});

// ------------------------------------------------------------ model lists

Deno.test("models: the OpenAI and Anthropic SDKs retrieve a route, 404 for an unknown one", async () => {
  const upstream = startFakeUpstream();
  await withKind("openai-chat", upstream, async (gw) => {
    const model = await gw.openai().models.retrieve("smart");
    assert.equal(model.id, "smart");
    assert.equal(model.object, "model");
    assert.equal(model.owned_by, "pulsegate");
    for (const id of ["nope", "off"]) {
      await assert.rejects(
        gw.openai().models.retrieve(id),
        (err) =>
          err instanceof OpenAI.NotFoundError && err.code === "gw.client.unknown_model" &&
          err.headers.get("x-pulsegate-error") === "client",
      );
    }
    const claude = await anthropic(gw).models.retrieve("other");
    assert.equal(claude.id, "other");
    assert.equal(claude.type, "model");
    assert.equal(claude.display_name, "other");
    await assert.rejects(
      anthropic(gw).models.retrieve("nope"),
      (err) =>
        err instanceof Anthropic.NotFoundError &&
        JSON.stringify(err.error).includes("gw.client.unknown_model"),
    );
  });
});

Deno.test("models: Google's SDK lists and gets the enabled routes", async () => {
  const upstream = startFakeUpstream();
  await withKind("openai-chat", upstream, async (gw) => {
    for (const apiVersion of ["v1beta", "v1"]) {
      const ai = genai(gw, { apiVersion });
      const models = await Array.fromAsync(await ai.models.list());
      assert.deepEqual(models.map((m) => m.name), ["models/smart", "models/other"], apiVersion);
      assert.deepEqual(models[0]?.supportedActions, [
        "generateContent",
        "streamGenerateContent",
        "countTokens",
      ]);
      const one = await ai.models.get({ model: "smart" });
      assert.equal(one.name, "models/smart");
      assert.equal(one.displayName, "smart");
      await assert.rejects(
        ai.models.get({ model: "off" }),
        (err) => err instanceof ApiError && err.status === 404,
      );
    }
  });
});
