import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, postJson, startTestGateway } from "./harness.ts";
import {
  chatError,
  chatStream,
  chatStreamHeld,
  chatWhole,
  silentAfterHeaders,
} from "./fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const messages = [{ role: "user", content: "hi" }];
const good = { text: ["ok"], usage: { input: 1, output: 1 } };

function twoUpstreams(
  urls: string[],
  opts: { models: [string, string]; idleSecs?: number },
): ConfigInput {
  const { models } = opts;
  return {
    failover: {
      // 100 s is 1 s at the test scale: every answer that is not silence must come within it,
      // and the first answer of a cold process under load once took over 300 ms (30 s).
      idle_timeout_secs: opts.idleSecs ?? 100,
      failures_to_pause: 100,
      retries_per_candidate: 0,
    },
    upstreams: urls.map((url, i) => ({
      id: `up${i + 1}`,
      kind: "openai-chat" as const,
      base_url: url,
    })),
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: models[0] }, { upstream: "up2", model: models[1] }],
    }],
  };
}

// The busy stream stays live until the test releases it, so the second request always meets
// it, however slow the machine; the long window (36 s) keeps the idle timer out of it.
const held = { idleSecs: 3600 };

Deno.test("among equal candidates the one with fewer live requests goes first", async () => {
  const release = Promise.withResolvers<void>();
  const a = startFakeUpstream({ fallback: () => chatStreamHeld(good, release.promise) });
  const b = startFakeUpstream({ fallback: () => chatWhole(good) });
  const gw = await startTestGateway(
    twoUpstreams([a.url, b.url], { models: ["same", "same"], ...held }),
  );
  try {
    const busy = postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    });
    await eventually(() => gw.slots.inFlight("up1") === 1);
    const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
    await res.text();
    assert.equal(b.calls.length, 1, "up2 had no live request, so it went first");
    release.resolve();
    await (await busy).text();
  } finally {
    release.resolve();
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("different models keep the operator's order whatever the load", async () => {
  // Streamed asks get a held stream, whole asks a quick answer, whatever the arrival order.
  const release = Promise.withResolvers<void>();
  const a = startFakeUpstream({
    fallback: (call) =>
      (call.json as { stream?: boolean }).stream
        ? chatStreamHeld(good, release.promise)
        : chatWhole(good),
  });
  const b = startFakeUpstream({ fallback: () => chatWhole(good) });
  const gw = await startTestGateway(
    twoUpstreams([a.url, b.url], { models: ["big", "small"], ...held }),
  );
  try {
    const busy = postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    });
    await eventually(() => gw.slots.inFlight("up1") === 1);
    const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
    await res.text();
    assert.equal(b.calls.length, 0);
    assert.equal(a.calls.length, 2);
    release.resolve();
    await (await busy).text();
  } finally {
    release.resolve();
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("a session stays on its upstream, and an idle timeout drops that affinity", async () => {
  const a = startFakeUpstream();
  const b = startFakeUpstream();
  const gw = await startTestGateway(twoUpstreams([a.url, b.url], { models: ["m1", "m2"] }));
  const ask = () =>
    postJson(`${gw.url}/v1/chat/completions`, { model: "smart", stream: true, messages }, {
      "x-session-id": "conv-1",
    });
  try {
    a.enqueue(chatError(500, "hiccup"));
    b.setHandler(() => chatStream(good));
    assert.match(await (await ask()).text(), /ok/);
    assert.deepEqual([a.calls.length, b.calls.length], [1, 1]);
    a.setHandler(() => chatStream(good));
    assert.match(await (await ask()).text(), /ok/);
    assert.deepEqual([a.calls.length, b.calls.length], [1, 2], "the conversation stayed on up2");
    b.setHandler(() => silentAfterHeaders);
    const res = await ask();
    assert.match(await res.text(), /ok/);
    assert.deepEqual([a.calls.length, b.calls.length], [2, 3], "up2 went silent: up1 answered");
    b.setHandler(() => chatStream(good));
    await (await ask()).text();
    assert.deepEqual([a.calls.length, b.calls.length], [3, 3], "affinity moved to up1");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("an idle timeout records the input tokens the upstream may have billed", async () => {
  const chunks = anthropicFake.streamChunks({ text: ["x"], usage: { input: 42, output: 1 } });
  const a = startFakeUpstream({
    fallback: () => ({
      headers: { "content-type": "text/event-stream" },
      body: [{ send: chunks[0]! }, { hang: true }], // message_start only
    }),
  });
  const b = startFakeUpstream({ fallback: () => chatStream(good) });
  const gw = await startTestGateway({
    // 1 s at the test scale: message_start must be read before the window closes, which took
    // over 300 ms once in a process still compiling its first Anthropic stream.
    failover: { idle_timeout_secs: 100 },
    upstreams: [
      { id: "claude", kind: "anthropic", base_url: a.url },
      { id: "oa", kind: "openai-chat", base_url: b.url },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "claude", model: "c" }, { upstream: "oa", model: "o" }],
    }],
  });
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    });
    await res.text();
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.outcome, "idle_timeout");
    assert.equal(attempts[0]!.inputTokens, 42);
    assert.equal(attempts[1]!.outcome, "success");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("a session id under two keys is two sessions: one key's pin never steers the other", async () => {
  const a = startFakeUpstream();
  const b = startFakeUpstream();
  const config = {
    ...twoUpstreams([a.url, b.url], { models: ["m1", "m2"] }),
    keys: [{ id: "ka", key_env: "KEY_A" }, { id: "kb", key_env: "KEY_B" }],
  };
  const gw = await startTestGateway(config, { env: { KEY_A: "secret-a", KEY_B: "secret-b" } });
  const ask = (key: string) =>
    postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      authorization: `Bearer ${key}`,
      "x-session-id": "conv-shared",
    });
  try {
    a.enqueue(chatError(500, "hiccup"));
    a.setHandler(() => chatWhole(good));
    b.setHandler(() => chatWhole(good));
    assert.equal((await (await ask("secret-a")).json()).choices[0].message.content, "ok");
    assert.deepEqual([a.calls.length, b.calls.length], [1, 1], "key a's session pinned to up2");
    const other = await ask("secret-b");
    assert.equal(other.status, 200);
    await other.body?.cancel();
    assert.deepEqual([a.calls.length, b.calls.length], [2, 1], "key b starts at up1, unpinned");
    await (await ask("secret-a")).body?.cancel();
    assert.deepEqual([a.calls.length, b.calls.length], [2, 2], "key a stays on up2");
    await (await ask("secret-b")).body?.cancel();
    assert.deepEqual([a.calls.length, b.calls.length], [3, 2], "key b's own pin is up1");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("count_tokens follows the key's own session pin, and no other key's", async () => {
  // Each upstream counts a different number, so a count tells which upstream was asked.
  const anthropicUp = (tokens: number) =>
    startFakeUpstream({
      fallback: (call) => ({
        body: [{
          send: call.path.endsWith("/count_tokens")
            ? JSON.stringify({ input_tokens: tokens })
            : anthropicFake.wholeBody({ text: ["ok"], usage: { input: 1, output: 1 } }),
        }],
      }),
    });
  const a = anthropicUp(11);
  const b = anthropicUp(22);
  const gw = await startTestGateway({
    failover: { failures_to_pause: 100, retries_per_candidate: 0 },
    upstreams: [
      { id: "up1", kind: "anthropic", base_url: a.url },
      { id: "up2", kind: "anthropic", base_url: b.url },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }],
    }],
    keys: [{ id: "ka", key_env: "KEY_A" }, { id: "kb", key_env: "KEY_B" }],
  }, {
    env: { KEY_A: "secret-a", KEY_B: "secret-b" },
    // The token counter's 10 s deadline is real time here: scaled, a loaded machine misses it.
    scale: 1,
  });
  const post = (path: string, opts: { key: string; session?: string; user?: string }) =>
    postJson(`${gw.url}${path}`, {
      model: "smart",
      max_tokens: 16,
      messages,
      ...(opts.user ? { metadata: { user_id: opts.user } } : {}),
    }, {
      "x-api-key": opts.key,
      "anthropic-version": "2023-06-01",
      ...(opts.session ? { "x-session-id": opts.session } : {}),
    });
  const counted = async (opts: { key: string; session?: string; user?: string }) => {
    const res = await post("/v1/messages/count_tokens", opts);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-pulsegate-token-count"), "upstream");
    return (await res.json()).input_tokens;
  };
  try {
    a.enqueue({ status: 500, body: [{ send: anthropicFake.errorBody(500, "hiccup") }] });
    const first = await post("/v1/messages", { key: "secret-a", session: "conv-7" });
    assert.equal(first.status, 200);
    await first.body?.cancel();
    assert.deepEqual([a.calls.length, b.calls.length], [1, 1], "key a's conv-7 pinned to up2");

    assert.equal(await counted({ key: "secret-a", session: "conv-7" }), 22, "a's own pin: up2");
    assert.equal(
      await counted({ key: "secret-a", user: "conv-7" }),
      22,
      "the session named in the body, as generation reads it",
    );
    assert.equal(await counted({ key: "secret-b", session: "conv-7" }), 11, "b is not pinned");
    // The name key a's pin is stored under, sent raw by key b, must not reach that pin.
    const stolen = JSON.stringify(["ka", "conv-7"]);
    assert.equal(await counted({ key: "secret-b", session: stolen }), 11, "b cannot use a's pin");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});
