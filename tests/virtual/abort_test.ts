/**
 * The operator's (and a key's own) abort of a request or a session (docs/design.md "Abort and
 * disconnect"), in every phase and client format; the admin token. A whole gateway in virtual
 * time at the real idle timeout (300 s), which no abort here waits for.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { chatRoute } from "../harness.ts";
import { type Received, startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatStream,
  contentThenSilence,
  headersNever,
  silentAfterHeaders,
} from "../fake_upstreams/openai_chat_script.ts";

const ADMIN = "admin-secret";
const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });
const admin = { authorization: `Bearer ${ADMIN}` };
const CHAT = "/v1/chat/completions";

/** One fake upstream behind a gateway with the admin token; the config may name the fake. */
async function withAdmin(
  opts: { config?: (url: string) => ConfigInput; env?: Record<string, string> } = {},
): Promise<VirtualGateway> {
  return await startVirtualGateway({
    config: ([url]) => opts.config?.(url!) ?? chatRoute([url!]),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN, ...opts.env },
  });
}

/** A POST to a control endpoint, its status and JSON (inside a `run`). */
async function control(
  v: VirtualGateway,
  path: string,
  headers: Record<string, string> = admin,
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await v.fetch(`http://127.0.0.1${path}`, { method: "POST", headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : {} };
}

const keyed = (url: string): ConfigInput => ({
  ...chatRoute([url]),
  keys: [{ id: "a", key_env: "PULSEGATE_KEY_A" }, { id: "b", key_env: "PULSEGATE_KEY_B" }],
});
const KEYS = { PULSEGATE_KEY_A: "key-a", PULSEGATE_KEY_B: "key-b" };

Deno.test("abort before headers: 400 final to the client at the abort's instant, a 499 aborted row, upstream connection closed, upstream not paused", async () => {
  await using v = await withAdmin();
  const up = v.ups[0]!;
  up.setHandler(() => headersNever);
  for (let i = 0; i < 3; i++) {
    const id = `abort-before-${i}`;
    // Three turns: the same one sent again would meet the fence its abort left (fence_test.ts).
    const turn = { ...chat(false), messages: [{ role: "user", content: `hi ${i}` }] };
    const res = await v.run((async () => {
      const pending = v.exchange(CHAT, turn, { headers: { "x-request-id": id } });
      await v.until(() => up.calls.length === i + 1, "the upstream has it");
      await v.clock.sleep(20_000);
      const answer = await control(v, `/request/${id}/abort`);
      assert.equal(answer.status, 200);
      assert.deepEqual(answer.json.requests, [id]);
      assert.equal((answer.json.fence as { kind: string }).kind, "turn");
      return await pending;
    })());
    // A Chat client is told 400, which no agent retries; the row keeps the gateway's 499.
    assert.equal(res.status, 400);
    assert.ok(res.headersAt >= 20_000 && res.headersAt < 300_000, `told at ${res.headersAt}`);
    assert.equal(res.headers.get("x-should-retry"), "false");
    assert.equal(res.headers.get("x-pulsegate-error"), "aborted");
    assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.request.aborted");
    assert.equal(res.headers.get("x-request-id"), id);
    assert.equal(JSON.parse(res.text).error.code, "gw.request.aborted");
    assert.equal(await up.calls[i]!.closed, "cancelled");
    const { request, attempts } = await v.row(id);
    assert.equal(request.status, 499);
    assert.equal(request.failureSource, "aborted");
    assert.equal(request.errorCode, "gw.request.aborted");
    assert.equal(attempts[0]!.outcome, "aborted");
  }
  assert.equal(v.gw.cooldowns.isPaused("up1"), false, "three aborts never pause an upstream");
  assert.equal(v.gw.cooldowns.get("up1").consecutiveFailures, 0);
  assert.equal(v.gw.metrics.aborts.get(), 3);
  assert.equal(v.gw.metrics.inflight, 0);
});

Deno.test("abort during the opening hold and while waiting for a slot", async () => {
  await using v = await withAdmin({
    config: (url) => ({
      failover: { slot_wait_secs: 300 },
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: url, max_in_flight: 1 }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    }),
  });
  const { gw } = v;
  const up = v.ups[0]!;
  up.setHandler(() => silentAfterHeaders);
  const [h, w] = await v.run((async () => {
    const holding = v.exchange(CHAT, chat(true), { headers: { "x-request-id": "hold" } });
    await v.until(() => gw.registry.get("hold")?.state === "holding", "hold holding");
    const waiting = v.exchange(CHAT, chat(true), { headers: { "x-request-id": "wait" } });
    await v.until(() => gw.registry.get("wait")?.state === "waiting_for_slot", "wait waiting");
    assert.equal((await control(v, "/request/wait/abort")).status, 200);
    const w = await waiting;
    assert.equal(up.calls.length, 1, "the slot waiter never reached the upstream");
    assert.equal((await control(v, "/request/hold/abort")).status, 200);
    return [await holding, w];
  })());
  assert.equal(w.status, 400, "aborted before any header");
  assert.equal(h.status, 400, "aborted inside the 15 s hold");
  assert.ok(h.headersAt < 15_000, `aborted at ${h.headersAt} ms, inside the hold`);
  assert.equal(h.headers.get("x-pulsegate-error"), "aborted");
  assert.equal(gw.slots.inFlight("up1"), 0);
});

/** Mid-stream, each client format ends with its own error event. */
const MID: Array<[string, string, unknown, RegExp]> = [
  ["openai-chat", CHAT, chat(true), /data: \{"error":.*gw\.request\.aborted/],
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
  Deno.test(`${format}: abort mid-stream, 60 s in, ends with the client's error event`, async () => {
    await using v = await withAdmin();
    const up = v.ups[0]!;
    up.setHandler(() => contentThenSilence("partial"));
    const id = `mid-${format}`;
    const got = await v.run((async () => {
      const answer = v.exchange(path, body, { headers: { "x-request-id": id } });
      await v.until(() => v.gw.registry.get(id)?.state === "streaming", "content passed on");
      await v.clock.sleep(60_000);
      assert.equal((await control(v, `/request/${id}/abort`)).status, 200);
      return await answer;
    })());
    assert.equal(got.status, 200);
    assert.equal(got.pieces[0]!.at, 0);
    assert.match(got.pieces[0]!.text, /partial/);
    assert.match(got.text, ending);
    assert.ok(got.endedAt >= 60_000 && got.endedAt < 300_000, `ended at ${got.endedAt} ms`);
    const { request, attempts } = await v.row(id);
    assert.equal(request.failureSource, "aborted");
    assert.equal(attempts.at(-1)!.outcome, "aborted");
    assert.equal(await up.calls[0]!.closed, "cancelled");
  });
}

Deno.test("a session abort stops every request of that session and nothing else", async () => {
  await using v = await withAdmin();
  v.ups[0]!.setHandler(() => headersNever);
  await v.run((async () => {
    const send = (id: string, session: string) =>
      v.exchange(CHAT, chat(false), { headers: { "x-request-id": id, "x-session-id": session } });
    const a = send("s1-a", "s1");
    const b = send("s1-b", "s1");
    const c = send("s2-c", "s2");
    await v.until(() => v.gw.registry.size === 3, "three live");
    const stopped = await control(v, "/sessions/s1/abort");
    assert.equal(stopped.status, 200);
    assert.deepEqual((stopped.json.requests as string[]).sort(), ["s1-a", "s1-b"]);
    assert.equal((await a).status, 400);
    assert.equal((await b).status, 400);
    assert.ok(v.gw.registry.has("s2-c"), "the other session runs on");
    const other = await control(v, "/sessions/s2/abort");
    assert.deepEqual(other.json.requests, ["s2-c"]);
    await c;
  })());
});

Deno.test("abort of a finished or unknown request is 404, an idle session is fenced; without a token, or with another key, refused", async () => {
  await using v = await withAdmin({ env: KEYS, config: keyed });
  const up = v.ups[0]!;
  up.setHandler(() => chatStream({ text: ["x"] }));
  await v.send(CHAT, chat(false), {
    headers: { "x-request-id": "finished", authorization: "Bearer key-a" },
  });
  await v.run((async () => {
    const finished = await control(v, "/request/finished/abort");
    assert.equal(finished.status, 404);
    assert.equal(finished.headers.get("x-pulsegate-error-code"), "control.request_not_running");
    assert.equal(
      (finished.json.error as { code: string }).code,
      "control.request_not_running",
    );
    // Nothing runs in it, but a session abort fences the session all the same (an agent between
    // two turns); with session fences off it is the 404 it was (fence_test.ts).
    const session = await control(v, "/sessions/none/abort");
    assert.equal(session.status, 200);
    assert.deepEqual(session.json.requests, []);
    assert.equal((session.json.fence as { kind: string }).kind, "session");

    up.setHandler(() => headersNever);
    const live = v.exchange(CHAT, chat(false), {
      headers: { "x-request-id": "owned", authorization: "Bearer key-a" },
    });
    await v.until(() => v.gw.registry.has("owned"), "owned live");
    assert.equal((await control(v, "/request/owned/abort", {})).status, 401);
    const otherKey = await control(v, "/request/owned/abort", { authorization: "Bearer key-b" });
    assert.equal(otherKey.status, 403);
    assert.ok(v.gw.registry.has("owned"), "refused aborts stop nothing");
    const own = await control(v, "/request/owned/abort", { authorization: "Bearer key-a" });
    assert.equal(own.status, 200, "the key that made a request may abort it");
    assert.equal((await live).status, 400);
  })());
});

Deno.test("a session id under two keys: each key's session abort stops only its own, never 403", async () => {
  await using v = await withAdmin({ env: KEYS, config: keyed });
  v.ups[0]!.setHandler(() => headersNever);
  await v.run((async () => {
    const send = (id: string, key: string) =>
      v.exchange(CHAT, chat(false), {
        headers: {
          authorization: `Bearer ${key}`,
          "x-request-id": id,
          "x-session-id": "shared",
        },
      });
    const a1 = send("a-1", "key-a");
    const b1 = send("b-1", "key-b");
    const b2 = send("b-2", "key-b");
    await v.until(() => v.gw.registry.size === 3, "three live");
    const byA = await control(v, "/sessions/shared/abort", { authorization: "Bearer key-a" });
    assert.equal(byA.status, 200, "key b's requests in the same id are no reason to refuse a");
    assert.deepEqual(byA.json.requests, ["a-1"]);
    assert.equal((await a1).status, 400);
    assert.ok(v.gw.registry.has("b-1") && v.gw.registry.has("b-2"), "key b's session runs on");
    const again = await control(v, "/sessions/shared/abort", { authorization: "Bearer key-a" });
    assert.equal(again.status, 200, "nothing of a's runs: its fence is renewed");
    assert.deepEqual(again.json.requests, []);
    const byAdmin = await control(v, "/sessions/shared/abort");
    assert.equal(byAdmin.status, 200, "the operator stops the id under every key");
    assert.deepEqual((byAdmin.json.requests as string[]).sort(), ["b-1", "b-2"]);
    assert.equal((await b1).status, 400);
    assert.equal((await b2).status, 400);
  })());
});

Deno.test("a client-named request id that is already live answers 409", async () => {
  await using v = await withAdmin();
  v.ups[0]!.setHandler(() => headersNever);
  await v.run((async () => {
    const first = v.exchange(CHAT, chat(false), { headers: { "x-request-id": "dup" } });
    await v.until(() => v.gw.registry.has("dup"), "dup live");
    const second: Received = await v.exchange(CHAT, chat(false), {
      headers: { "x-request-id": "dup" },
    });
    assert.equal(second.status, 409);
    assert.equal(JSON.parse(second.text).error.code, "gw.client.duplicate_request_id");
    await control(v, "/request/dup/abort");
    await first;
  })());
});

Deno.test("admin token guards /metrics and /admin/api; open metrics is opt-in", async () => {
  await using v = await startVirtualGateway({
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
    metricsOpen: false,
  });
  const get = (path: string, headers: Record<string, string> = {}) =>
    v.run((async () => {
      const res = await v.fetch(`http://127.0.0.1${path}`, { headers });
      return { status: res.status, text: await res.text() };
    })());
  assert.equal((await get("/metrics")).status, 401);
  const ok = await get("/metrics", admin);
  assert.equal(ok.status, 200);
  assert.match(ok.text, /pulsegate_inflight_requests 0/);
  assert.equal((await get("/admin/api/config")).status, 401);
  assert.equal((await get("/admin/api/config", { authorization: "Bearer nope" })).status, 401);
});
