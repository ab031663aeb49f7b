/**
 * Google's Interactions API through the gateway (docs/interactions.md), with the official
 * `@google/genai` client unmodified: whole and streamed answers with failover before content,
 * a stored interaction's later turns, gets, cancels and deletes sent to the upstream that
 * stores it and nowhere else, `store: false` everywhere, and clear refusals where the history
 * cannot be had.
 */
import assert from "node:assert/strict";
import { GoogleGenAI } from "@google/genai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { InteractionHomes } from "../gateway/route/interaction_homes.ts";
import { countInteractionHomes } from "../db/interaction_homes_store.ts";
import type { Clock } from "../gateway/runtime/clock.ts";
import { createLogger } from "../gateway/runtime/logger.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { type Call, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
import {
  answer,
  errorBody,
  errorEvent,
  interactionsStreamChunks,
  storingInteractions,
} from "./fake_upstreams/interactions_script.ts";
import { chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { withTempDb } from "./db_helpers.ts";

const json = { "content-type": "application/json" };

/** A storing fake whose next `failures` creates answer 503 (or `fail` says otherwise). */
function flaky(prefix: string) {
  const fake = storingInteractions({ prefix, key: `key-${prefix}` });
  const state = { failures: 0, fail: (): Script => unavailable() };
  const up = startFakeUpstream({
    fallback: (call) => {
      const create = call.method === "POST" && !call.path.includes("/cancel");
      if (create && state.failures > 0) {
        state.failures--;
        return state.fail();
      }
      return fake.handler(call);
    },
  });
  return { up, state, stored: fake.stored };
}

function unavailable(): Script {
  return { status: 503, headers: json, body: [{ send: errorBody(503, "overloaded") }] };
}

/** A stream that dies before any content: created, a status update, then an error event. */
function errorBeforeContent(): Script {
  const opening = interactionsStreamChunks({ text: ["x"], usage: { input: 1, output: 1 } })
    .slice(0, 2);
  return {
    headers: { "content-type": "text/event-stream" },
    body: [...opening, errorEvent("boom")].map((send) => ({ send })),
  };
}

function upstream(id: string, url: string) {
  return { id, kind: "gemini-interactions" as const, base_url: url, api_key_env: `KEY_${id}` };
}

function twoUpstreams(a: string, b: string, extra: Partial<ConfigInput> = {}): ConfigInput {
  return {
    upstreams: [upstream("a", a), upstream("b", b)],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "a", model: "gemini-a" }, { upstream: "b", model: "gemini-b" }],
    }],
    ...extra,
  };
}

const ENV = { KEY_a: "key-a", KEY_b: "key-b" };

function client(gw: TestGateway, apiKey = "unused"): GoogleGenAI {
  return new GoogleGenAI({ apiKey, httpOptions: { baseUrl: gw.url } });
}

/** The SDK's own retries off: what the client sees is the gateway's doing. */
const NO_RETRIES = { maxRetries: 0 };

async function events(stream: AsyncIterable<{ event_type: string }>) {
  const seen: Record<string, unknown>[] = [];
  for await (const event of stream) seen.push(event as unknown as Record<string, unknown>);
  return seen;
}

function textOf(seen: Record<string, unknown>[]): string {
  return seen
    .filter((e) => e.event_type === "step.delta")
    .map((e) => e.delta as { type: string; text?: string })
    .filter((d) => d.type === "text")
    .map((d) => d.text)
    .join("");
}

function creates(calls: Call[]): Call[] {
  return calls.filter((c) =>
    c.method === "POST" && new URL(c.path, "http://x").pathname ===
      "/v1beta/interactions"
  );
}

async function thrown(run: () => Promise<unknown>): Promise<{ status?: number; message: string }> {
  try {
    await run();
  } catch (err) {
    return err as { status?: number; message: string };
  }
  throw new Error("the call succeeded; an error was expected");
}

Deno.test("the official client, whole and streamed, fails over to the next Interactions upstream before content", async () => {
  const a = flaky("a");
  const b = flaky("b");
  await using gw = await startTestGateway(twoUpstreams(a.up.url, b.up.url), { env: ENV });
  try {
    const ai = client(gw);
    a.state.failures = 2; // the first try and its retry
    const whole = await ai.interactions.create({ model: "smart", input: "hi" }, NO_RETRIES);
    assert.equal(whole.output_text, "Hello");
    assert.equal(whole.id, "b_1");
    assert.equal(creates(a.up.calls).length, 2);
    // The upstream got the client's body with its own model, and its own key.
    const sent = b.up.calls[0]!;
    assert.equal((sent.json as { model: string }).model, "gemini-b");
    assert.equal(sent.headers.get("x-goog-api-key"), "key-b");

    a.state.failures = 1;
    a.state.fail = errorBeforeContent;
    const seen = await events(
      await ai.interactions.create({ model: "smart", input: "hi", stream: true }, NO_RETRIES),
    );
    // One answer, b's, from its start: nothing of a's abandoned stream reached the client.
    const created = seen.filter((e) => e.event_type === "interaction.created");
    assert.deepEqual(created.map((e) => (e.interaction as { id: string }).id), ["b_2"]);
    assert.equal(textOf(seen), "Hello");
    assert.equal(seen.at(-1)?.event_type, "interaction.completed");
    assert.equal(creates(a.up.calls).length, 3);
  } finally {
    await a.up.close();
    await b.up.close();
  }
});

Deno.test("an error after content ends the stream with an error event carrying the gateway's code", async () => {
  const up = startFakeUpstream({
    fallback: () => {
      const chunks = interactionsStreamChunks({
        text: ["Hel", "lo"],
        usage: { input: 1, output: 1 },
      });
      // Up to the first text delta, then the upstream's own error event.
      return {
        headers: { "content-type": "text/event-stream" },
        body: [...chunks.slice(0, 4), { wait: 50 }, errorEvent("boom")].map((step) =>
          typeof step === "string" ? { send: step } : step
        ),
      };
    },
  });
  const other = startFakeUpstream({ fallback: () => unavailable() });
  await using gw = await startTestGateway(twoUpstreams(up.url, other.url), { env: ENV });
  try {
    const seen = await events(
      await client(gw).interactions.create({ model: "smart", input: "hi", stream: true }),
    );
    assert.equal(textOf(seen), "Hel");
    const last = seen.at(-1)!;
    assert.equal(last.event_type, "error");
    assert.equal((last.error as { code: string }).code, "gw.upstream.error");
    // Nothing is tried after content: the second upstream was never called.
    assert.equal(other.calls.length, 0);
  } finally {
    await up.close();
    await other.close();
  }
});

Deno.test("a turn continuing a stored interaction goes to the upstream that stored it, and only there", async () => {
  const a = flaky("a");
  const b = flaky("b");
  await using gw = await startTestGateway(twoUpstreams(a.up.url, b.up.url), { env: ENV });
  try {
    const ai = client(gw);
    a.state.failures = 2;
    const first = await ai.interactions.create({ model: "smart", input: "hi" }, NO_RETRIES);
    assert.equal(first.id, "b_1");
    const aCalls = creates(a.up.calls).length;

    // a is healthy and first in the route now, but only b holds the conversation.
    const second = await ai.interactions.create({
      model: "smart",
      input: "and then?",
      previous_interaction_id: first.id,
    }, NO_RETRIES);
    assert.equal(second.id, "b_2");
    const third = await events(
      await ai.interactions.create({
        model: "smart",
        input: "more",
        previous_interaction_id: second.id,
        stream: true,
      }, NO_RETRIES),
    );
    assert.equal(textOf(third), "Hello");
    assert.equal(creates(a.up.calls).length, aCalls);
    // The body went on as the client wrote it: b got the id it issued.
    assert.equal(
      (creates(b.up.calls).at(-1)!.json as { previous_interaction_id: string })
        .previous_interaction_id,
      "b_2",
    );

    // b fails: the client hears so, and a (which would answer without the history) is not asked.
    b.state.failures = 2;
    const err = await thrown(() =>
      ai.interactions.create({
        model: "smart",
        input: "again",
        previous_interaction_id: "b_3",
      }, NO_RETRIES)
    );
    assert.equal(err.status, 504);
    assert.match(err.message, /tried: b; skipped: a: does not store interaction 'b_3'/);
    assert.equal(b.state.failures, 0, "b was tried and retried");
    assert.equal(creates(a.up.calls).length, aCalls);
  } finally {
    await a.up.close();
    await b.up.close();
  }
});

Deno.test("get, cancel and delete go to the upstream storing the interaction; a deleted one is forgotten", async () => {
  const a = flaky("a");
  const b = flaky("b");
  const config = twoUpstreams(a.up.url, b.up.url);
  config.upstreams[0] = { ...config.upstreams[0]!, headers: { "x-tenant": "acme" } };
  await using gw = await startTestGateway(config, { env: ENV });
  try {
    const ai = client(gw);
    const onA = await ai.interactions.create({ model: "smart", input: "hi" }, NO_RETRIES);
    a.state.failures = 2;
    const onB = await ai.interactions.create({ model: "smart", input: "hi" }, NO_RETRIES);
    assert.deepEqual([onA.id, onB.id], ["a_1", "b_1"]);

    assert.equal((await ai.interactions.get(onA.id)).id, "a_1");
    assert.equal((await ai.interactions.get(onB.id)).output_text, "Stored");
    assert.equal(a.up.calls.at(-1)!.path, "/v1beta/interactions/a_1?stream=false");
    assert.equal(a.up.calls.at(-1)!.headers.get("x-goog-api-key"), "key-a");
    // The operator's extra headers go with a get as with a turn.
    assert.equal(a.up.calls.at(-1)!.headers.get("x-tenant"), "acme");
    const replay = await events(await ai.interactions.get(onB.id, { stream: true }));
    assert.equal(textOf(replay), "Stored");
    assert.equal(b.up.calls.at(-1)!.path, "/v1beta/interactions/b_1?stream=true");

    const cancelled = await ai.interactions.cancel(onB.id);
    assert.equal(cancelled.status, "cancelled");
    assert.equal(b.stored.get("b_1")?.status, "cancelled");
    await ai.interactions.delete(onB.id);
    assert.equal(b.stored.has("b_1"), false);
    const bCalls = b.up.calls.length;
    const gone = await thrown(() => ai.interactions.get(onB.id, {}, NO_RETRIES));
    assert.equal(gone.status, 404);
    assert.match(gone.message, /interaction 'b_1' is not stored by any upstream of this gateway/);
    const res = await postJson(`${gw.url}/v1beta/interactions`, {
      model: "smart",
      input: "x",
      previous_interaction_id: "b_1",
    });
    assert.equal(res.status, 404);
    assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.client.unknown_interaction");
    await res.body?.cancel();
    // Neither the get nor the turn reached an upstream.
    assert.equal(b.up.calls.length, bCalls);
    assert.equal(creates(a.up.calls).length, 3);
  } finally {
    await a.up.close();
    await b.up.close();
  }
});

Deno.test("a background interaction is created where it is stored, and polled there", async () => {
  const a = flaky("a");
  const b = flaky("b");
  await using gw = await startTestGateway(twoUpstreams(a.up.url, b.up.url), { env: ENV });
  try {
    const ai = client(gw);
    a.state.failures = 2;
    const run = await ai.interactions.create(
      { model: "smart", input: "research this", background: true },
      NO_RETRIES,
    );
    assert.deepEqual([run.id, run.status], ["b_1", "in_progress"]);
    // Passed through as the client wrote it: only an Interactions upstream can run one.
    assert.equal((creates(b.up.calls)[0]!.json as { background: boolean }).background, true);
    const polled = await ai.interactions.get(run.id);
    assert.equal(polled.id, "b_1");
    assert.equal(b.up.calls.at(-1)!.method, "GET");
    assert.equal(a.up.calls.filter((c) => c.method === "GET").length, 0);
  } finally {
    await a.up.close();
    await b.up.close();
  }
});

Deno.test("another key's interaction, an unknown one and one stored nowhere answer 404; no upstream is asked", async () => {
  const a = flaky("a");
  const config: ConfigInput = {
    upstreams: [upstream("a", a.up.url)],
    routes: [{ model: "smart", candidates: [{ upstream: "a", model: "gemini-a" }] }],
    keys: [
      { id: "one", key_env: "PULSEGATE_KEY_ONE" },
      { id: "two", key_env: "PULSEGATE_KEY_TWO" },
    ],
  };
  const env = { ...ENV, PULSEGATE_KEY_ONE: "secret-one", PULSEGATE_KEY_TWO: "secret-two" };
  await using gw = await startTestGateway(config, { env });
  try {
    const one = client(gw, "secret-one");
    const two = client(gw, "secret-two");
    const mine = await one.interactions.create({ model: "smart", input: "hi" }, NO_RETRIES);
    const unstored = await one.interactions.create(
      { model: "smart", input: "hi", store: false },
      NO_RETRIES,
    );
    assert.equal(a.stored.has(unstored.id), false);
    const calls = a.up.calls.length;
    const refusals = [
      () =>
        two.interactions.create(
          { model: "smart", input: "x", previous_interaction_id: mine.id },
          NO_RETRIES,
        ),
      () => two.interactions.get(mine.id, {}, NO_RETRIES),
      () => two.interactions.delete(mine.id, {}, NO_RETRIES),
      () =>
        one.interactions.create({
          model: "smart",
          input: "x",
          previous_interaction_id: unstored.id,
        }, NO_RETRIES),
      () =>
        one.interactions.create(
          { model: "smart", input: "x", previous_interaction_id: "nope" },
          NO_RETRIES,
        ),
      () =>
        one.interactions.create({
          model: "smart",
          input: "x",
          previous_interaction_id: "x".repeat(20_000),
        }, NO_RETRIES),
    ];
    for (const refuse of refusals) {
      const err = await thrown(refuse);
      assert.equal(err.status, 404, err.message);
      assert.match(err.message, /is not stored by any upstream of this gateway for this key/);
      assert.ok(err.message.length < 2_000, "the message quotes a long id bounded");
    }
    assert.equal(a.up.calls.length, calls);
    // The owner still has it.
    const next = await one.interactions.create({
      model: "smart",
      input: "x",
      previous_interaction_id: mine.id,
    }, NO_RETRIES);
    assert.equal(next.output_text, "Hello");
  } finally {
    await a.up.close();
  }
});

Deno.test("store: false works everywhere: translations never ask an upstream to store", async () => {
  const interactions = flaky("i");
  const chat = startFakeUpstream({
    fallback: (call) =>
      (call.json as { stream?: boolean }).stream
        ? chatStream({ text: ["Hel", "lo"], usage: { input: 3, output: 2 } })
        : chatWhole({ text: ["Hel", "lo"], usage: { input: 3, output: 2 } }),
  });
  const config: ConfigInput = {
    upstreams: [upstream("i", interactions.up.url), {
      id: "c",
      kind: "openai-chat",
      base_url: chat.url,
    }],
    routes: [
      { model: "to-interactions", candidates: [{ upstream: "i", model: "gemini-i" }] },
      { model: "to-chat", candidates: [{ upstream: "c", model: "gpt" }] },
    ],
  };
  await using gw = await startTestGateway(config, { env: { KEY_i: "key-i" } });
  try {
    // A Chat client's conversation goes to the Interactions API as input, stored nowhere.
    const answer = await gw.openai().chat.completions.create({
      model: "to-interactions",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello" },
        { role: "user", content: "again" },
      ],
    });
    assert.equal(answer.choices[0]!.message.content, "Hello");
    const body = interactions.up.calls[0]!.json as Record<string, unknown>;
    assert.equal(body.store, false);
    assert.equal(body.system_instruction, "be brief");
    assert.deepEqual(body.input, [
      { type: "user_input", content: [{ type: "text", text: "hi" }] },
      { type: "model_output", content: [{ type: "text", text: "hello" }] },
      { type: "user_input", content: [{ type: "text", text: "again" }] },
    ]);
    assert.equal(interactions.stored.size, 0);

    // An Interactions client on a Chat upstream, with store: false and with the default.
    const ai = client(gw);
    for (const store of [false, undefined]) {
      const whole = await ai.interactions.create(
        { model: "to-chat", input: "hi", store },
        NO_RETRIES,
      );
      assert.equal(whole.output_text, "Hello");
      const seen = await events(
        await ai.interactions.create({ model: "to-chat", input: "hi", store, stream: true }),
      );
      assert.equal(textOf(seen), "Hello");
      // Nothing was stored, so nothing can be continued: said so, not answered without history.
      const err = await thrown(() =>
        ai.interactions.create({
          model: "to-chat",
          input: "x",
          previous_interaction_id: whole.id,
        }, NO_RETRIES)
      );
      assert.equal(err.status, 404);
    }
    // Passed through with store: false, the Interactions upstream is told so and nothing is kept.
    const passed = await ai.interactions.create(
      { model: "to-interactions", input: "hi", store: false },
      NO_RETRIES,
    );
    assert.equal((interactions.up.calls.at(-1)!.json as { store: boolean }).store, false);
    assert.equal(interactions.stored.has(passed.id), false);
  } finally {
    await interactions.up.close();
    await chat.close();
  }
});

Deno.test("instances sharing a database send a turn to the upstream another instance recorded; a route without it, or with it off, refuses", async () => {
  const a = flaky("a");
  const b = flaky("b");
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-interactions-" });
  const config = (bEnabled: boolean): ConfigInput => ({
    upstreams: [upstream("a", a.up.url), { ...upstream("b", b.up.url), enabled: bEnabled }],
    routes: [
      {
        model: "smart",
        candidates: [{ upstream: "a", model: "gemini-a" }, { upstream: "b", model: "gemini-b" }],
      },
      { model: "only-a", candidates: [{ upstream: "a", model: "gemini-a" }] },
    ],
  });
  try {
    const first = await startTestGateway(config(true), { dir, env: ENV });
    let id: string;
    try {
      a.state.failures = 2;
      id = (await client(first).interactions.create({ model: "smart", input: "hi" }, NO_RETRIES))
        .id;
      assert.equal(id, "b_1");
    } finally {
      await first.stop();
    }
    const second = await startTestGateway(config(true), { dir, env: ENV });
    try {
      const ai = client(second);
      const aCalls = creates(a.up.calls).length;
      const next = await ai.interactions.create(
        { model: "smart", input: "more", previous_interaction_id: id },
        NO_RETRIES,
      );
      assert.equal(next.id, "b_2");
      assert.equal(creates(a.up.calls).length, aCalls);
      const elsewhere = await postJson(`${second.url}/v1beta/interactions`, {
        model: "only-a",
        input: "x",
        previous_interaction_id: id,
      });
      assert.equal(elsewhere.status, 400);
      assert.equal(
        elsewhere.headers.get("x-pulsegate-error-code"),
        "gw.client.interaction_elsewhere",
      );
      assert.match(await elsewhere.text(), /continue it on route 'smart'/);
    } finally {
      await second.stop();
    }
    const third = await startTestGateway(config(false), { dir, env: ENV });
    try {
      const res = await postJson(`${third.url}/v1beta/interactions`, {
        model: "smart",
        input: "x",
        previous_interaction_id: id,
      });
      assert.equal(res.status, 503);
      assert.equal(
        res.headers.get("x-pulsegate-error-code"),
        "gw.upstream.interaction_home_unavailable",
      );
      assert.match(await res.text(), /stored on upstream 'b', which is not enabled/);
    } finally {
      await third.stop();
    }
    assert.equal(creates(a.up.calls).length, 2);
  } finally {
    await a.up.close();
    await b.up.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

/** A clock that only moves when asked: each write gets the next millisecond. */
function steppingClock(): Clock {
  let t = 1_000;
  return {
    now: () => t++,
    after: () => () => {},
    sleep: () => Promise.resolve(),
    deadline: (ms, from = t) => from + ms,
    elapsed: (since, until = t) => until - since,
  };
}

Deno.test("interaction homes are bounded per key, in memory and in the database, and per key", async () => {
  await withTempDb(async ({ db }) => {
    const homes = new InteractionHomes({
      db,
      clock: steppingClock(),
      log: createLogger({ quiet: true }),
      memoryPerKey: 3,
      storedPerKey: 5,
      pruneEvery: 4,
    });
    const home = { upstream: "b", route: "smart" };
    for (let i = 1; i <= 8; i++) homes.note("one", `id-${i}`, home);
    homes.note("two", "theirs", home);
    // Eight writes to key one: the eighth pruned it to its newest five.
    await eventually(async () => (await countInteractionHomes(db, "one")) === 5);
    assert.deepEqual(await homes.find("one", "id-8"), home);
    // Out of memory (three kept) but in the database: found there.
    assert.deepEqual(await homes.find("one", "id-4"), home);
    // Pruned: gone everywhere.
    assert.equal(await homes.find("one", "id-1"), undefined);
    // Another key's id is not found under this one.
    assert.equal(await homes.find("one", "theirs"), undefined);
    assert.deepEqual(await homes.find("two", "theirs"), home);
    // An over-long id is neither kept nor looked up.
    homes.note("one", "x".repeat(600), home);
    assert.equal(await homes.find("one", "x".repeat(600)), undefined);
  });
});

Deno.test("the official client's automatic continuation goes on for the key that made the interaction; its continuation token is refused to another key", async () => {
  let n = 0;
  const up = startFakeUpstream({
    fallback: (call) => {
      const resumes = typeof (call.json as { continuation_token?: unknown }).continuation_token ===
        "string";
      n++;
      // The first hop stops at the decode limit; the one resumed from its token completes.
      return answer(call, {
        id: `a_${n}`,
        text: resumes ? ["lo"] : ["Hel"],
        usage: { input: 7, output: 5 },
        ...(resumes ? {} : { continuationToken: `tok-${n}` }),
      });
    },
  });
  const config: ConfigInput = {
    upstreams: [upstream("a", up.url)],
    routes: [{ model: "smart", candidates: [{ upstream: "a", model: "gemini-a" }] }],
    keys: [
      { id: "one", key_env: "PULSEGATE_KEY_ONE" },
      { id: "two", key_env: "PULSEGATE_KEY_TWO" },
    ],
  };
  const env = { ...ENV, PULSEGATE_KEY_ONE: "secret-one", PULSEGATE_KEY_TWO: "secret-two" };
  await using gw = await startTestGateway(config, { env });
  try {
    const merged = await client(gw, "secret-one").interactions.create(
      { model: "smart", input: "hi" },
      NO_RETRIES,
    );
    assert.equal(merged.id, "a_2");
    assert.deepEqual(
      creates(up.calls).map((c) => {
        const body = c.json as { continuation_token?: string; previous_interaction_id?: string };
        return [body.continuation_token, body.previous_interaction_id];
      }),
      [[undefined, undefined], ["tok-1", "a_1"]],
    );
    const calls = up.calls.length;
    const err = await thrown(() =>
      client(gw, "secret-two").interactions.create(
        { model: "smart", input: "hi", store: false, continuation_token: "tok-1" },
        NO_RETRIES,
      )
    );
    assert.equal(err.status, 404);
    assert.match(err.message, /'continuation_token' names nothing .* handed to this key/);
    assert.equal(up.calls.length, calls);
  } finally {
    await up.close();
  }
});
