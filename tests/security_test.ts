import assert from "node:assert/strict";
import OpenAI from "openai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { chatRoute, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";

const KEYS = { KEY_A: "secret-a", KEY_B: "secret-b" };

/** Two routes; key `a` may use both, key `b` only `other`. */
function keyedConfig(url: string): ConfigInput {
  const base = chatRoute([url]);
  return {
    ...base,
    routes: [
      ...base.routes,
      { model: "other", candidates: [{ upstream: "up1", model: "model-2" }] },
    ],
    keys: [
      { id: "a", key_env: "KEY_A" },
      { id: "b", key_env: "KEY_B", routes: ["other"] },
    ],
  };
}

async function withKeyedGateway(
  fn: (gw: TestGateway, up: FakeUpstream) => Promise<void>,
): Promise<void> {
  const up = startFakeUpstream();
  const gw = await startTestGateway(keyedConfig(up.url), { env: KEYS });
  try {
    await fn(gw, up);
  } finally {
    await gw.stop();
    await up.close();
  }
}

const chat = (model = "smart") => ({ model, messages: [{ role: "user", content: "hi" }] });
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

Deno.test("a finished request's row cannot be replaced by reusing its x-request-id", async () => {
  await withKeyedGateway(async (gw, up) => {
    up.enqueue(chatWhole({ text: ["hello"], usage: { input: 3, output: 1 } }));
    const first = await postJson(`${gw.url}/v1/chat/completions`, chat(), {
      ...bearer(KEYS.KEY_A),
      "x-request-id": "X",
      "x-session-id": "sess-a",
    });
    assert.equal(first.status, 200);
    await first.body?.cancel();
    const before = (await gw.row("X")).request;
    assert.equal(before.keyId, "a");
    assert.equal(before.status, 200);
    assert.equal(before.route, "smart");

    // No key: refused, and under an id of its own, not X.
    const anon = await postJson(`${gw.url}/v1/chat/completions`, chat("other"), {
      "x-request-id": "X",
      "x-session-id": "sess-evil",
    });
    assert.equal(anon.status, 401);
    assert.equal((await anon.json()).error.code, "gw.client.unauthorized");
    const anonId = anon.headers.get("x-request-id");
    assert.ok(anonId && anonId !== "X");
    assert.equal((await gw.row(anonId)).request.status, 401, "the refusal has its own row");

    // A valid key: the id is taken, 409 in the client's format, no upstream call.
    const reused = await postJson(`${gw.url}/v1/chat/completions`, chat("other"), {
      ...bearer(KEYS.KEY_B),
      "x-request-id": "X",
    });
    assert.equal(reused.status, 409);
    assert.equal((await reused.json()).error.code, "gw.client.duplicate_request_id");
    assert.notEqual(reused.headers.get("x-request-id"), "X");
    assert.equal(up.calls.length, 1);

    await gw.writer.flush();
    assert.deepEqual((await gw.row("X")).request, before);
  });
});

Deno.test("a closed row is kept even when a row with its id reaches the writer", async () => {
  await withKeyedGateway(async (gw, up) => {
    up.enqueue(chatWhole({ text: ["hello"], usage: { input: 3, output: 1 } }));
    const first = await postJson(`${gw.url}/v1/chat/completions`, chat(), {
      ...bearer(KEYS.KEY_A),
      "x-request-id": "Y",
    });
    await first.body?.cancel();
    const before = await gw.row("Y");
    assert.equal(before.attempts.length, 1);
    // What a request that slipped past the 409 check (e.g. the database briefly away) would write.
    gw.writer.writeRequest({ ...before.request, keyId: null, status: 401, route: "evil" });
    gw.writer.writeAttempt({ ...before.attempts[0]!, upstream: "evil", outcome: "error" });
    await gw.writer.flush();
    assert.deepEqual(await gw.row("Y"), before);
  });
});

Deno.test("metrics are labelled only with configured routes, never with a caller's model", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(keyedConfig(up.url), { env: KEYS });
  try {
    const names = Array.from({ length: 5 }, () => `m${crypto.randomUUID().slice(0, 8)}`);
    for (const model of names) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, chat(model));
      assert.equal(res.status, 401);
      await res.body?.cancel();
    }
    // Authorized but unknown: a 404, still not a series of its own.
    const unknown = await postJson(`${gw.url}/v1/chat/completions`, chat(names[0]), {
      ...bearer(KEYS.KEY_A),
    });
    assert.equal(unknown.status, 404);
    await unknown.body?.cancel();
    // Gemini names the model in the path.
    const gemini = await postJson(`${gw.url}/v1beta/models/${names[1]}:generateContent`, {
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
    });
    assert.equal(gemini.status, 401);
    await gemini.body?.cancel();
    up.enqueue(chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }));
    const ok = await postJson(`${gw.url}/v1/chat/completions`, chat(), bearer(KEYS.KEY_A));
    assert.equal(ok.status, 200);
    await ok.body?.cancel();

    const text = await (await fetch(`${gw.url}/metrics`)).text();
    for (const name of names) assert.ok(!text.includes(name), `${name} labels a series`);
    const routes = new Set(
      [...text.matchAll(/^pulsegate_request[a-z_]*\{[^}]*route="([^"]*)"/gm)].map((m) => m[1]),
    );
    assert.deepEqual([...routes].sort(), ["smart", "unknown"]);
    assert.match(text, /pulsegate_requests_total\{[^}]*route="unknown"[^}]*\} 7/);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("models: listing and retrieving need a key and show only the key's routes", async () => {
  await withKeyedGateway(async (gw) => {
    const client = (apiKey: string) =>
      new OpenAI({ baseURL: `${gw.url}/v1`, apiKey, maxRetries: 0 });
    await assert.rejects(
      client("wrong").models.list(),
      (err) => err instanceof OpenAI.AuthenticationError,
    );
    const bare = await fetch(`${gw.url}/v1/models`);
    assert.equal(bare.status, 401);
    assert.equal((await bare.json()).error.code, "gw.client.unauthorized");
    for (const path of ["/v1/models/smart", "/v1beta/models", "/v1beta/models/smart"]) {
      const res = await fetch(`${gw.url}${path}`);
      assert.equal(res.status, 401, path);
      await res.body?.cancel();
    }

    const all = await Array.fromAsync(await client(KEYS.KEY_A).models.list());
    assert.deepEqual(all.map((m) => m.id), ["smart", "other"]);
    const limited = await Array.fromAsync(await client(KEYS.KEY_B).models.list());
    assert.deepEqual(limited.map((m) => m.id), ["other"]);
    assert.equal((await client(KEYS.KEY_B).models.retrieve("other")).id, "other");
    await assert.rejects(
      client(KEYS.KEY_B).models.retrieve("smart"),
      (err) => err instanceof OpenAI.NotFoundError,
    );
    const gemini = await fetch(`${gw.url}/v1beta/models`, {
      headers: { "x-goog-api-key": KEYS.KEY_B },
    });
    assert.deepEqual((await gemini.json()).models.map((m: { name: string }) => m.name), [
      "models/other",
    ]);
  });
});

Deno.test("a route the key may not use answers exactly like a route that does not exist", async () => {
  await withKeyedGateway(async (gw, up) => {
    const asB = {
      ...bearer(KEYS.KEY_B),
      "x-api-key": KEYS.KEY_B,
      "x-goog-api-key": KEYS.KEY_B,
      "anthropic-version": "2023-06-01",
    };
    /** Status, error headers and body of one call, with the model's name blanked out. */
    const answer = async (model: string, call: (model: string) => Promise<Response>) => {
      const res = await call(model);
      return {
        status: res.status,
        source: res.headers.get("x-pulsegate-error"),
        code: res.headers.get("x-pulsegate-error-code"),
        body: (await res.text()).replaceAll(model, "MODEL"),
      };
    };
    const surfaces: Record<string, (model: string) => Promise<Response>> = {
      chat: (model) => postJson(`${gw.url}/v1/chat/completions`, chat(model), asB),
      messages: (model) =>
        postJson(`${gw.url}/v1/messages`, { ...chat(model), max_tokens: 16 }, asB),
      count_tokens: (model) => postJson(`${gw.url}/v1/messages/count_tokens`, chat(model), asB),
      gemini: (model) =>
        postJson(`${gw.url}/v1beta/models/${model}:generateContent`, {
          contents: [{ role: "user", parts: [{ text: "hi" }] }],
        }, asB),
      gemini_count: (model) =>
        postJson(`${gw.url}/v1beta/models/${model}:countTokens`, {
          contents: [{ role: "user", parts: [{ text: "hi" }] }],
        }, asB),
      model: (model) => fetch(`${gw.url}/v1/models/${model}`, { headers: bearer(KEYS.KEY_B) }),
      gemini_model: (model) =>
        fetch(`${gw.url}/v1beta/models/${model}`, { headers: { "x-goog-api-key": KEYS.KEY_B } }),
    };
    for (const [surface, call] of Object.entries(surfaces)) {
      const forbidden = await answer("smart", call); // a route, but not key b's
      const absent = await answer("nosuch", call); // no route at all
      assert.equal(forbidden.status, 404, surface);
      assert.equal(forbidden.code, "gw.client.unknown_model", surface);
      assert.deepEqual(forbidden, absent, surface);
    }
    assert.equal(up.calls.length, 0);

    // The operator still reads why in history; the caller never does.
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat("smart"), {
      ...bearer(KEYS.KEY_B),
      "x-request-id": "not-b-route",
    });
    assert.equal(res.status, 404);
    assert.doesNotMatch(await res.text(), /may not/);
    const { request } = await gw.row("not-b-route");
    assert.equal(request.status, 404);
    assert.equal(request.errorCode, "gw.client.unknown_model");
    assert.match(request.errorMessage ?? "", /key 'b' may not use route 'smart'/);
  });
});
