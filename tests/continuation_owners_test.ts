/**
 * Continuation ids and tokens belong to the key they were handed to (docs/design.md
 * "Continuation ids"): a Responses id, item or conversation and an Interactions
 * continuation token another key received, or one the gateway never handed out, answer 404 in the
 * client's format before any upstream call; the key that received it continues; instances
 * sharing a database agree; with no keys nothing changes.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { type Call, type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import { answer } from "./fake_upstreams/interactions_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "./fake_upstreams/openai_responses_script.ts";
import type { Db } from "../db/client.ts";

type Json = Record<string, unknown>;

const KEYS = { KEY_ONE: "secret-one", KEY_TWO: "secret-two", KEY_THREE: "secret-three" };
const ENV = { ...KEYS, GOOGLE_KEY: "google-key" };

/**
 * A Responses upstream that stores what it answers, as OpenAI does: answer n is `resp_n`, its
 * message item `msg_n`, and a request naming a conversation gets it back in the answer.
 */
function responsesFake(): FakeUpstream {
  let n = 0;
  return startFakeUpstream({
    fallback: (call) => {
      const body = call.json as Json;
      n++;
      const own = (text: string) => text.replaceAll("msg_0001", `msg_${n}`);
      const script = { id: `resp_${n}`, text: ["Hel", "lo"], usage: { input: 3, output: 2 } };
      if (body.stream === true) {
        return {
          headers: { "content-type": "text/event-stream" },
          body: responsesStreamChunks(script).map((c) => ({ send: own(String(c)) })),
        };
      }
      const whole = JSON.parse(own(responsesWholeBody(script)));
      const conversation = body.conversation;
      if (typeof conversation === "string") whole.conversation = { id: conversation };
      return {
        headers: { "content-type": "application/json" },
        body: [{ send: JSON.stringify(whole) }],
      };
    },
  });
}

/**
 * An Interactions upstream whose every answer stops at the decode limit: answer n hands back
 * `tok-n`, and a streamed one a mid-stream checkpoint `ckpt-n` before it.
 */
function interactionsFake(): FakeUpstream {
  let n = 0;
  return startFakeUpstream({
    fallback: (call) => {
      n++;
      return answer(call, {
        id: `i_${n}`,
        text: ["Hel", "lo"],
        usage: { input: 7, output: 5 },
        continuationToken: `tok-${n}`,
        checkpointToken: `ckpt-${n}`,
      });
    },
  });
}

function config(
  urls: { responses: string; interactions: string },
  keys: ConfigInput["keys"] = [
    { id: "one", key_env: "KEY_ONE" },
    { id: "two", key_env: "KEY_TWO" },
  ],
): ConfigInput {
  return {
    upstreams: [
      { id: "oai", kind: "openai-responses", base_url: urls.responses },
      {
        id: "goo",
        kind: "gemini-interactions",
        base_url: urls.interactions,
        api_key_env: "GOOGLE_KEY",
      },
    ],
    routes: [
      { model: "gpt", candidates: [{ upstream: "oai", model: "gpt-5" }] },
      { model: "gem", candidates: [{ upstream: "goo", model: "gemini-3" }] },
    ],
    keys,
  };
}

/** A Responses request under `secret` (none: an open gateway). */
function responses(gw: TestGateway, body: Json, secret?: string): Promise<Response> {
  const auth: Record<string, string> = secret ? { authorization: `Bearer ${secret}` } : {};
  return postJson(`${gw.url}/v1/responses`, { model: "gpt", input: "hi", ...body }, auth);
}

/** An Interactions request under `secret`, stored nowhere: the token carries the decode. */
function interactions(gw: TestGateway, body: Json, secret?: string): Promise<Response> {
  const auth: Record<string, string> = secret ? { "x-goog-api-key": secret } : {};
  return postJson(
    `${gw.url}/v1beta/interactions`,
    { model: "gem", input: "hi", store: false, ...body },
    auth,
  );
}

/** Reads a 200 answer whole: JSON, or a stream's text. */
async function ok(res: Response): Promise<string> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return text;
}

/** A refusal: 404, the gateway's code, and the error body the client read. */
async function notFound(res: Response): Promise<{ error: Json }> {
  const text = await res.text();
  assert.equal(res.status, 404, text);
  assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.unknown_continuation");
  return JSON.parse(text);
}

function sent(calls: Call[]): Json[] {
  return calls.map((c) => c.json as Json);
}

/** How many handles are bound, every key's together (continuation_owners, migration 23). */
async function bindings(db: Db): Promise<number> {
  const result = await db.client.execute("SELECT COUNT(*) AS n FROM continuation_owners");
  return Number(result.rows[0]?.n ?? 0);
}

async function withFakes(
  run: (urls: { responses: string; interactions: string }, fakes: {
    oai: FakeUpstream;
    goo: FakeUpstream;
  }) => Promise<void>,
): Promise<void> {
  const oai = responsesFake();
  const goo = interactionsFake();
  try {
    await run({ responses: oai.url, interactions: goo.url }, { oai, goo });
  } finally {
    await oai.close();
    await goo.close();
  }
}

Deno.test("a continuation token another key received is refused 404 like an unknown one, before any upstream call; the key it was handed to continues", async () => {
  await withFakes(async (urls, { goo }) => {
    await using gw = await startTestGateway(config(urls), { env: ENV });
    const whole = JSON.parse(await ok(await interactions(gw, {}, "secret-one")));
    assert.equal(whole.continuation_token, "tok-1");
    const stream = await ok(await interactions(gw, { stream: true }, "secret-one"));
    assert.match(stream, /"continuation_token":"ckpt-2"/);
    assert.match(stream, /"continuation_token":"tok-2"/);
    const calls = goo.calls.length;

    const unknown = await notFound(
      await interactions(gw, { continuation_token: "tok-never" }, "secret-two"),
    );
    assert.equal(unknown.error.status, "NOT_FOUND");
    for (const token of ["tok-1", "ckpt-2", "tok-2"]) {
      const refused = await notFound(
        await interactions(gw, { continuation_token: token }, "secret-two"),
      );
      // Word for word the answer to a token that does not exist: nothing tells them apart.
      assert.deepEqual(refused, unknown, token);
    }
    assert.equal(goo.calls.length, calls, "no upstream was asked");

    for (const token of ["tok-1", "ckpt-2", "tok-2"]) {
      await ok(await interactions(gw, { continuation_token: token }, "secret-one"));
    }
    assert.deepEqual(
      sent(goo.calls.slice(calls)).map((b) => b.continuation_token),
      ["tok-1", "ckpt-2", "tok-2"],
    );
  });
});

Deno.test("a response id and an item another key received are refused 404 before any upstream call; the key they were handed to continues", async () => {
  await withFakes(async (urls, { oai }) => {
    await using gw = await startTestGateway(config(urls), { env: ENV });
    const first = JSON.parse(await ok(await responses(gw, {}, "secret-one")));
    assert.equal(first.id, "resp_1");
    assert.equal(first.output[0].id, "msg_1");
    const streamed = await ok(await responses(gw, { stream: true }, "secret-one"));
    assert.match(streamed, /"id":"resp_2"/);
    const calls = oai.calls.length;

    const unknown = await notFound(
      await responses(gw, { previous_response_id: "resp_never" }, "secret-two"),
    );
    assert.equal(unknown.error.type, "not_found_error");
    for (const id of ["resp_1", "resp_2"]) {
      const refused = await notFound(
        await responses(gw, { previous_response_id: id }, "secret-two"),
      );
      assert.deepEqual(refused, unknown, id);
    }
    const item = [{ type: "item_reference", id: "msg_1" }];
    const refusedItem = await notFound(await responses(gw, { input: item }, "secret-two"));
    assert.equal(refusedItem.error.param, "input[0].id");
    assert.equal(oai.calls.length, calls, "no upstream was asked");

    await ok(await responses(gw, { previous_response_id: "resp_1" }, "secret-one"));
    await ok(await responses(gw, { previous_response_id: "resp_2", stream: true }, "secret-one"));
    await ok(await responses(gw, { input: item }, "secret-one"));
    assert.deepEqual(
      sent(oai.calls.slice(calls)).map((b) => b.previous_response_id ?? b.input),
      ["resp_1", "resp_2", item],
    );
  });
});

Deno.test("an id the gateway never handed out is refused under keys, unless the key accepts unseen ids: then the answer binds it to that key", async () => {
  await withFakes(async (urls, { oai, goo }) => {
    const keys = [
      { id: "one", key_env: "KEY_ONE" },
      { id: "two", key_env: "KEY_TWO", accepts_unseen_continuations: true },
      { id: "three", key_env: "KEY_THREE", accepts_unseen_continuations: true },
    ];
    await using gw = await startTestGateway(config(urls, keys), { env: ENV });
    await notFound(await responses(gw, { previous_response_id: "resp_elsewhere" }, "secret-one"));
    await notFound(await responses(gw, { conversation: "conv_elsewhere" }, "secret-one"));
    await notFound(await interactions(gw, { continuation_token: "tok-elsewhere" }, "secret-one"));
    assert.equal(oai.calls.length + goo.calls.length, 0);

    // A key trusted with unseen ids may name one; the conversation its answer names is its own now.
    const answered = JSON.parse(
      await ok(await responses(gw, { conversation: "conv_elsewhere" }, "secret-two")),
    );
    assert.deepEqual(answered.conversation, { id: "conv_elsewhere" });
    await ok(await interactions(gw, { continuation_token: "tok-elsewhere" }, "secret-two"));
    await notFound(await responses(gw, { conversation: "conv_elsewhere" }, "secret-three"));
    // An id handed to another key is refused even to a key that accepts unseen ones.
    await notFound(await responses(gw, { previous_response_id: answered.id }, "secret-three"));
    await ok(await responses(gw, { conversation: "conv_elsewhere" }, "secret-two"));
    assert.equal(oai.calls.length, 2);
  });
});

Deno.test("with no keys, ids are passed on as before and nothing is recorded", async () => {
  await withFakes(async (urls, { oai, goo }) => {
    await using gw = await startTestGateway(config(urls, []), { env: ENV });
    await ok(await responses(gw, {}));
    await ok(await responses(gw, { previous_response_id: "resp_elsewhere" }));
    await ok(await responses(gw, { conversation: "conv_elsewhere" }));
    await ok(await interactions(gw, { continuation_token: "tok-elsewhere" }));
    assert.equal(oai.calls.length + goo.calls.length, 4);
    assert.equal(await bindings(gw.db), 0);
  });
});

Deno.test("two gateways on one database: an id handed to a key at one is refused to another key at the other, and continued by its owner there", async () => {
  await withFakes(async (urls, { oai, goo }) => {
    const dir = await Deno.makeTempDir({ prefix: "pulsegate-continuations-" });
    try {
      await using first = await startTestGateway(config(urls), { dir, env: ENV });
      await using second = await startTestGateway(config(urls), { dir, env: ENV });
      const id = JSON.parse(await ok(await responses(first, {}, "secret-one"))).id;
      const token = JSON.parse(await ok(await interactions(first, {}, "secret-one")))
        .continuation_token;
      // Written off the request path: the second instance reads them from the database.
      await eventually(async () => (await bindings(first.db)) >= 3, { what: "bound" });
      const calls = oai.calls.length + goo.calls.length;
      await notFound(await responses(second, { previous_response_id: id }, "secret-two"));
      await notFound(await interactions(second, { continuation_token: token }, "secret-two"));
      assert.equal(oai.calls.length + goo.calls.length, calls);
      await ok(await responses(second, { previous_response_id: id }, "secret-one"));
      await ok(await interactions(second, { continuation_token: token }, "secret-one"));
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  });
});
