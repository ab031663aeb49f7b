/**
 * Candidate order under load, session affinity and what drops it (docs/observability.md
 * "Cache-aware affinity"), a whole gateway in virtual time at the real idle timeout (300 s).
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatError,
  chatStream,
  chatStreamHeld,
  chatWhole,
  silentAfterHeaders,
} from "../fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";

const messages = [{ role: "user", content: "hi" }];
const good = { text: ["ok"], usage: { input: 1, output: 1 } };
const CHAT = "/v1/chat/completions";

function twoUpstreams(urls: string[], opts: { models: [string, string] }): ConfigInput {
  const { models } = opts;
  return {
    failover: { failures_to_pause: 100, retries_per_candidate: 0 },
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

/** A whole answer asked while up1 holds a stream the test releases after. */
async function askWhileBusy(v: VirtualGateway, release: () => void): Promise<void> {
  await v.run((async () => {
    const busy = v.exchange(CHAT, { model: "smart", stream: true, messages });
    await v.until(() => v.gw.slots.inFlight("up1") === 1, "up1 busy");
    await v.exchange(CHAT, { model: "smart", messages });
    release();
    await busy;
  })());
}

Deno.test("among equal candidates the one with fewer live requests goes first", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => twoUpstreams(urls, { models: ["same", "same"] }),
  });
  const release = Promise.withResolvers<void>();
  const [a, b] = v.ups;
  a!.setHandler(() => chatStreamHeld(good, release.promise));
  b!.setHandler(() => chatWhole(good));
  await askWhileBusy(v, release.resolve);
  assert.equal(b!.calls.length, 1, "up2 had no live request, so it went first");
});

Deno.test("different models keep the operator's order whatever the load", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => twoUpstreams(urls, { models: ["big", "small"] }),
  });
  // Streamed asks get a held stream, whole asks a quick answer, whatever the arrival order.
  const release = Promise.withResolvers<void>();
  const [a, b] = v.ups;
  a!.setHandler((call) =>
    (call.json as { stream?: boolean }).stream
      ? chatStreamHeld(good, release.promise)
      : chatWhole(good)
  );
  b!.setHandler(() => chatWhole(good));
  await askWhileBusy(v, release.resolve);
  assert.equal(b!.calls.length, 0);
  assert.equal(a!.calls.length, 2);
});

Deno.test("a session stays on its upstream, and an idle timeout drops that affinity at 300 s", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => twoUpstreams(urls, { models: ["m1", "m2"] }),
  });
  const [a, b] = v.ups;
  const ask = () =>
    v.send(CHAT, { model: "smart", stream: true, messages }, {
      headers: { "x-session-id": "conv-1" },
    });
  a!.enqueue(chatError(500, "hiccup"));
  b!.setHandler(() => chatStream(good));
  assert.match((await ask()).text, /ok/);
  assert.deepEqual([a!.calls.length, b!.calls.length], [1, 1]);
  a!.setHandler(() => chatStream(good));
  assert.match((await ask()).text, /ok/);
  assert.deepEqual([a!.calls.length, b!.calls.length], [1, 2], "the conversation stayed on up2");
  b!.setHandler(() => silentAfterHeaders);
  const moved = await ask();
  assert.match(moved.text, /ok/);
  assert.equal(moved.pieces.find((p) => p.text.includes("ok"))?.at, 300_000);
  assert.deepEqual([a!.calls.length, b!.calls.length], [2, 3], "up2 went silent: up1 answered");
  b!.setHandler(() => chatStream(good));
  await ask();
  assert.deepEqual([a!.calls.length, b!.calls.length], [3, 3], "affinity moved to up1");
});

Deno.test("an idle timeout records the input tokens the upstream may have billed", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: ([ua, ub]) => ({
      upstreams: [
        { id: "claude", kind: "anthropic", base_url: ua! },
        { id: "oa", kind: "openai-chat", base_url: ub! },
      ],
      routes: [{
        model: "smart",
        candidates: [{ upstream: "claude", model: "c" }, { upstream: "oa", model: "o" }],
      }],
    }),
  });
  const chunks = anthropicFake.streamChunks({ text: ["x"], usage: { input: 42, output: 1 } });
  v.ups[0]!.setHandler(() => ({
    headers: { "content-type": "text/event-stream" },
    body: [{ send: chunks[0]! }, { hang: true }], // message_start only
  }));
  v.ups[1]!.setHandler(() => chatStream(good));
  const got = await v.send(CHAT, { model: "smart", stream: true, messages });
  const { attempts } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(attempts[0]!.outcome, "idle_timeout");
  assert.equal(attempts[0]!.durationMs, 300_000);
  assert.equal(attempts[0]!.inputTokens, 42);
  assert.equal(attempts[1]!.outcome, "success");
});

Deno.test("a session id under two keys is two sessions: one key's pin never steers the other", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    env: { KEY_A: "secret-a", KEY_B: "secret-b" },
    config: (urls) => ({
      ...twoUpstreams(urls, { models: ["m1", "m2"] }),
      keys: [{ id: "ka", key_env: "KEY_A" }, { id: "kb", key_env: "KEY_B" }],
    }),
  });
  const [a, b] = v.ups;
  const ask = (key: string) =>
    v.send(CHAT, { model: "smart", messages }, {
      headers: { authorization: `Bearer ${key}`, "x-session-id": "conv-shared" },
    });
  a!.enqueue(chatError(500, "hiccup"));
  a!.setHandler(() => chatWhole(good));
  b!.setHandler(() => chatWhole(good));
  assert.equal(JSON.parse((await ask("secret-a")).text).choices[0].message.content, "ok");
  assert.deepEqual([a!.calls.length, b!.calls.length], [1, 1], "key a's session pinned to up2");
  assert.equal((await ask("secret-b")).status, 200);
  assert.deepEqual([a!.calls.length, b!.calls.length], [2, 1], "key b starts at up1, unpinned");
  await ask("secret-a");
  assert.deepEqual([a!.calls.length, b!.calls.length], [2, 2], "key a stays on up2");
  await ask("secret-b");
  assert.deepEqual([a!.calls.length, b!.calls.length], [3, 2], "key b's own pin is up1");
});

Deno.test("count_tokens follows the key's own session pin, and no other key's", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    env: { KEY_A: "secret-a", KEY_B: "secret-b" },
    config: ([ua, ub]) => ({
      failover: { failures_to_pause: 100, retries_per_candidate: 0 },
      upstreams: [
        { id: "up1", kind: "anthropic", base_url: ua! },
        { id: "up2", kind: "anthropic", base_url: ub! },
      ],
      routes: [{
        model: "smart",
        candidates: [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }],
      }],
      keys: [{ id: "ka", key_env: "KEY_A" }, { id: "kb", key_env: "KEY_B" }],
    }),
  });
  const [a, b] = v.ups;
  // Each upstream counts a different number, so a count tells which upstream was asked.
  for (const [up, tokens] of [[a!, 11], [b!, 22]] as const) {
    up.setHandler((call) => ({
      body: [{
        send: call.path.endsWith("/count_tokens")
          ? JSON.stringify({ input_tokens: tokens })
          : anthropicFake.wholeBody({ text: ["ok"], usage: { input: 1, output: 1 } }),
      }],
    }));
  }
  const post = (path: string, opts: { key: string; session?: string; user?: string }) =>
    v.send(path, {
      model: "smart",
      max_tokens: 16,
      messages,
      ...(opts.user ? { metadata: { user_id: opts.user } } : {}),
    }, {
      headers: {
        "x-api-key": opts.key,
        "anthropic-version": "2023-06-01",
        ...(opts.session ? { "x-session-id": opts.session } : {}),
      },
    });
  const counted = async (opts: { key: string; session?: string; user?: string }) => {
    const res = await post("/v1/messages/count_tokens", opts);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-pulsegate-token-count"), "upstream");
    return JSON.parse(res.text).input_tokens;
  };
  a!.enqueue({ status: 500, body: [{ send: anthropicFake.errorBody(500, "hiccup") }] });
  const first = await post("/v1/messages", { key: "secret-a", session: "conv-7" });
  assert.equal(first.status, 200);
  assert.deepEqual([a!.calls.length, b!.calls.length], [1, 1], "key a's conv-7 pinned to up2");

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
});
