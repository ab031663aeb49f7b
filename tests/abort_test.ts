import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import {
  chatRoute,
  eventually,
  postJson,
  startTestGateway,
  type TestGateway,
  withGateway,
} from "./harness.ts";
import {
  chatStream,
  contentThenSilence,
  headersNever,
  silentAfterHeaders,
} from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";

const ADMIN = "admin-secret";
const failover = { idle_timeout_secs: 300 }; // 3 s scaled: aborts always come first
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });
const admin = { authorization: `Bearer ${ADMIN}` };

/** One fake upstream behind a gateway with the admin token; the config may name the fake. */
function withAdmin(
  run: (gw: TestGateway, up: FakeUpstream) => Promise<void>,
  opts: { config?: (url: string) => ConfigInput; env?: Record<string, string>; scale?: number } =
    {},
): Promise<void> {
  return withGateway((gw, [up]) => run(gw, up!), {
    config: ([url]) => opts.config?.(url!) ?? chatRoute([url!], { failover }),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN, ...opts.env },
    scale: opts.scale,
  });
}

/** Aborts once the request is live, answering the control endpoint's response. */
async function abortWhenLive(gw: TestGateway, id: string): Promise<Response> {
  await eventually(() => gw.registry.has(id));
  return await fetch(`${gw.url}/request/${id}/abort`, { method: "POST", headers: admin });
}

Deno.test("abort before headers: 400 final to the client, a 499 aborted row, upstream connection closed, upstream not paused", async () => {
  await withAdmin(async (gw, up) => {
    up.setHandler(() => headersNever);
    for (let i = 0; i < 3; i++) {
      const id = `abort-before-${i}`;
      // Three turns: the same one sent again would meet the fence its abort left (fence_test.ts).
      const turn = { ...chat(false), messages: [{ role: "user", content: `hi ${i}` }] };
      const pending = postJson(`${gw.url}/v1/chat/completions`, turn, { "x-request-id": id });
      // Registered is not yet sent: a loaded machine may take a while between the two.
      await eventually(() => up.calls.length === i + 1);
      const control = await abortWhenLive(gw, id);
      assert.equal(control.status, 200);
      const answer = await control.json();
      assert.deepEqual(answer.requests, [id]);
      assert.equal(answer.fence.kind, "turn");
      const res = await pending;
      // A Chat client is told 400, which no agent retries; the row keeps the gateway's 499.
      assert.equal(res.status, 400);
      assert.equal(res.headers.get("x-should-retry"), "false");
      assert.equal(res.headers.get("x-pulsegate-error"), "aborted");
      assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.request.aborted");
      assert.equal(res.headers.get("x-request-id"), id);
      assert.equal((await res.json()).error.code, "gw.request.aborted");
      assert.equal(await up.calls[i]!.closed, "cancelled");
      const { request, attempts } = await gw.row(id);
      assert.equal(request.status, 499);
      assert.equal(request.failureSource, "aborted");
      assert.equal(request.errorCode, "gw.request.aborted");
      assert.equal(attempts[0]!.outcome, "aborted");
    }
    assert.equal(gw.cooldowns.isPaused("up1"), false, "three aborts never pause an upstream");
    assert.equal(gw.cooldowns.get("up1").consecutiveFailures, 0);
    assert.equal(gw.metrics.aborts.get(), 3);
    assert.equal(gw.metrics.inflight, 0);
  });
});

Deno.test("abort during the opening hold and while waiting for a slot", async () => {
  await withAdmin(async (gw, up) => {
    up.setHandler(() => silentAfterHeaders);
    const holding = postJson(`${gw.url}/v1/chat/completions`, chat(true), {
      "x-request-id": "hold",
    });
    await eventually(() => gw.registry.get("hold")?.state === "holding");
    const waiting = postJson(`${gw.url}/v1/chat/completions`, chat(true), {
      "x-request-id": "wait",
    });
    await eventually(() => gw.registry.get("wait")?.state === "waiting_for_slot");
    assert.equal(gw.registry.get("wait")?.state, "waiting_for_slot");
    assert.equal((await abortWhenLive(gw, "wait")).status, 200);
    const w = await waiting;
    assert.equal(w.status, 400, "aborted before any header");
    await w.body?.cancel();
    assert.equal(up.calls.length, 1, "the slot waiter never reached the upstream");
    assert.equal((await abortWhenLive(gw, "hold")).status, 200);
    const h = await holding;
    assert.equal(h.status, 400, "aborted inside the 1.5 s hold");
    assert.equal(h.headers.get("x-pulsegate-error"), "aborted");
    await h.body?.cancel();
    assert.equal(gw.slots.inFlight("up1"), 0);
  }, {
    // Everything above happens inside the opening hold: at scale 0.1 it lasts 1.5 s, many
    // times what these steps take even on a loaded machine (at 0.01 it was 150 ms).
    scale: 0.1,
    config: (url) => ({
      failover: { ...failover, slot_wait_secs: 300 },
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: url, max_in_flight: 1 }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    }),
  });
});

/** Mid-stream, each client format ends with its own error event. */
const MID: Array<[string, string, unknown, RegExp]> = [
  ["openai-chat", "/v1/chat/completions", chat(true), /data: \{"error":.*gw\.request\.aborted/],
  [
    "openai-responses",
    "/v1/responses",
    { model: "smart", stream: true, input: "hi" },
    /response\.failed[\s\S]*gw\.request\.aborted/,
  ],
  [
    "anthropic",
    "/v1/messages",
    { model: "smart", stream: true, max_tokens: 9, messages },
    /event: error[\s\S]*gw\.request\.aborted/,
  ],
  [
    "gemini",
    "/v1beta/models/smart:streamGenerateContent?alt=sse",
    {
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
    },
    /\n\n\{"error":[^\n]*INVALID_ARGUMENT[^\n]*\}\n\ndata: \{"error":[^\n]*INVALID_ARGUMENT[^\n]*\}\n\n$/,
  ],
];

for (const [format, path, body, ending] of MID) {
  Deno.test(`${format}: abort mid-stream ends with the client's error event`, async () => {
    await withAdmin(async (gw, up) => {
      up.setHandler(() => contentThenSilence("partial"));
      const id = `mid-${format}`;
      const res = await postJson(`${gw.url}${path}`, body, { "x-request-id": id });
      assert.equal(res.status, 200);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      while (!text.includes("partial")) text += (await reader.read()).value ?? "";
      assert.equal((await abortWhenLive(gw, id)).status, 200);
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += value;
      }
      assert.match(text, ending);
      const { request, attempts } = await gw.row(id);
      assert.equal(request.failureSource, "aborted");
      assert.equal(attempts.at(-1)!.outcome, "aborted");
      assert.equal(await up.calls[0]!.closed, "cancelled");
    });
  });
}

Deno.test("a session abort stops every request of that session and nothing else", async () => {
  await withAdmin(async (gw, up) => {
    up.setHandler(() => headersNever);
    const send = (id: string, session: string) =>
      postJson(`${gw.url}/v1/chat/completions`, chat(false), {
        "x-request-id": id,
        "x-session-id": session,
      });
    const a = send("s1-a", "s1");
    const b = send("s1-b", "s1");
    const c = send("s2-c", "s2");
    await eventually(() => gw.registry.size === 3);
    const control = await fetch(`${gw.url}/sessions/s1/abort`, { method: "POST", headers: admin });
    assert.equal(control.status, 200);
    assert.deepEqual((await control.json()).requests.sort(), ["s1-a", "s1-b"]);
    assert.equal((await a).status, 400);
    assert.equal((await b).status, 400);
    assert.ok(gw.registry.has("s2-c"), "the other session runs on");
    const other = await fetch(`${gw.url}/sessions/s2/abort`, { method: "POST", headers: admin });
    assert.deepEqual((await other.json()).requests, ["s2-c"]);
    await (await c).body?.cancel();
  });
});

Deno.test("abort of a finished or unknown request is 404, an idle session is fenced; without a token, or with another key, refused", async () => {
  const keys = { PULSEGATE_KEY_A: "key-a", PULSEGATE_KEY_B: "key-b" };
  await withAdmin(async (gw, up) => {
    up.setHandler(() => chatStream({ text: ["x"] }));
    const done = await postJson(`${gw.url}/v1/chat/completions`, chat(false), {
      "x-request-id": "finished",
      authorization: "Bearer key-a",
    });
    await done.body?.cancel();
    const finished = await fetch(`${gw.url}/request/finished/abort`, {
      method: "POST",
      headers: admin,
    });
    assert.equal(finished.status, 404);
    assert.equal(finished.headers.get("x-pulsegate-error-code"), "control.request_not_running");
    assert.equal((await finished.json()).error.code, "control.request_not_running");
    // Nothing runs in it, but a session abort fences the session all the same (an agent between
    // two turns); with session fences off it is the 404 it was (fence_test.ts).
    const session = await fetch(`${gw.url}/sessions/none/abort`, {
      method: "POST",
      headers: admin,
    });
    assert.equal(session.status, 200);
    const fenced = await session.json();
    assert.deepEqual(fenced.requests, []);
    assert.equal(fenced.fence.kind, "session");

    up.setHandler(() => headersNever);
    const live = postJson(`${gw.url}/v1/chat/completions`, chat(false), {
      "x-request-id": "owned",
      authorization: "Bearer key-a",
    });
    await eventually(() => gw.registry.has("owned"));
    const anonymous = await fetch(`${gw.url}/request/owned/abort`, { method: "POST" });
    assert.equal(anonymous.status, 401);
    await anonymous.body?.cancel();
    const otherKey = await fetch(`${gw.url}/request/owned/abort`, {
      method: "POST",
      headers: { authorization: "Bearer key-b" },
    });
    assert.equal(otherKey.status, 403);
    await otherKey.body?.cancel();
    assert.ok(gw.registry.has("owned"), "refused aborts stop nothing");
    const own = await fetch(`${gw.url}/request/owned/abort`, {
      method: "POST",
      headers: { authorization: "Bearer key-a" },
    });
    assert.equal(own.status, 200, "the key that made a request may abort it");
    await own.body?.cancel();
    assert.equal((await live).status, 400);
  }, {
    env: keys,
    config: (url) => ({
      ...chatRoute([url], { failover }),
      keys: [{ id: "a", key_env: "PULSEGATE_KEY_A" }, { id: "b", key_env: "PULSEGATE_KEY_B" }],
    }),
  });
});

Deno.test("a session id under two keys: each key's session abort stops only its own, never 403", async () => {
  const keys = { PULSEGATE_KEY_A: "key-a", PULSEGATE_KEY_B: "key-b" };
  await withAdmin(async (gw, up) => {
    up.setHandler(() => headersNever);
    const send = (id: string, key: string) =>
      postJson(`${gw.url}/v1/chat/completions`, chat(false), {
        authorization: `Bearer ${key}`,
        "x-request-id": id,
        "x-session-id": "shared",
      });
    const a1 = send("a-1", "key-a");
    const b1 = send("b-1", "key-b");
    const b2 = send("b-2", "key-b");
    await eventually(() => gw.registry.size === 3);
    const abortAs = (headers: Record<string, string>) =>
      fetch(`${gw.url}/sessions/shared/abort`, { method: "POST", headers });
    const byA = await abortAs({ authorization: "Bearer key-a" });
    assert.equal(byA.status, 200, "key b's requests in the same id are no reason to refuse a");
    assert.deepEqual((await byA.json()).requests, ["a-1"]);
    assert.equal((await a1).status, 400);
    assert.ok(gw.registry.has("b-1") && gw.registry.has("b-2"), "key b's session runs on");
    const again = await abortAs({ authorization: "Bearer key-a" });
    assert.equal(again.status, 200, "nothing of a's runs: its fence is renewed");
    assert.deepEqual((await again.json()).requests, []);
    const byAdmin = await abortAs(admin);
    assert.equal(byAdmin.status, 200, "the operator stops the id under every key");
    assert.deepEqual((await byAdmin.json()).requests.sort(), ["b-1", "b-2"]);
    assert.equal((await b1).status, 400);
    assert.equal((await b2).status, 400);
  }, {
    env: keys,
    config: (url) => ({
      ...chatRoute([url], { failover }),
      keys: [{ id: "a", key_env: "PULSEGATE_KEY_A" }, { id: "b", key_env: "PULSEGATE_KEY_B" }],
    }),
  });
});

Deno.test("a client-named request id that is already live answers 409", async () => {
  await withAdmin(async (gw, up) => {
    up.setHandler(() => headersNever);
    const first = postJson(`${gw.url}/v1/chat/completions`, chat(false), { "x-request-id": "dup" });
    await eventually(() => gw.registry.has("dup"));
    const second = await postJson(`${gw.url}/v1/chat/completions`, chat(false), {
      "x-request-id": "dup",
    });
    assert.equal(second.status, 409);
    assert.equal((await second.json()).error.code, "gw.client.duplicate_request_id");
    await abortWhenLive(gw, "dup");
    await (await first).body?.cancel();
  });
});

Deno.test("admin token guards /metrics and /admin/api; open metrics is opt-in", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]), {
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
    metricsOpen: false,
  });
  try {
    const closed = await fetch(`${gw.url}/metrics`);
    assert.equal(closed.status, 401);
    await closed.body?.cancel();
    const ok = await fetch(`${gw.url}/metrics`, { headers: admin });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /pulsegate_inflight_requests 0/);
    const api = await fetch(`${gw.url}/admin/api/config`);
    assert.equal(api.status, 401);
    await api.body?.cancel();
    const wrong = await fetch(`${gw.url}/admin/api/config`, {
      headers: { authorization: "Bearer nope" },
    });
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();
  } finally {
    await gw.stop();
    await up.close();
  }
});
