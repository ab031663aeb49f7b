import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { Affinity } from "../gateway/route/affinity.ts";
import {
  anthropicUserSession,
  boundedSession,
  headerSession,
} from "../gateway/formats/session_ids.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import {
  chatError,
  chatStream,
  chatWhole,
  headersNever,
} from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const answer = { text: ["ok"], usage: { input: 1, output: 1 } };
const messages = [{ role: "user", content: "hi" }];

/** Claude Code's current `metadata.user_id`: a JSON string naming device, account and session. */
const claudeCodeUserId = JSON.stringify({
  device_id: "d3v1ce0000000000000000000000000000000000000000000000000000000000",
  account_uuid: "acc-0000-1111",
  session_id: "9f1c2d3e-session",
});

// ---------------------------------------------------------------- units

Deno.test("sessions: headers are read in order, per client format", () => {
  const both = new Headers({ "x-session-id": "ours", "x-claude-code-session-id": "cc" });
  assert.equal(headerSession("anthropic", both), "ours");
  assert.equal(headerSession("anthropic", new Headers({ "x-claude-code-session-id": "cc" })), "cc");
  assert.equal(headerSession("openai-chat", new Headers({ session_id: "codex-1" })), "codex-1");
  assert.equal(
    headerSession("openai-responses", new Headers({ "session-id": "codex-2" })),
    "codex-2",
  );
  // A header another client sends means nothing in this format.
  assert.equal(
    headerSession("openai-chat", new Headers({ "x-claude-code-session-id": "cc" })),
    null,
  );
  assert.equal(headerSession("gemini", new Headers({ session_id: "x" })), null);
  assert.equal(headerSession("gemini", new Headers({ "x-session-id": "g" })), "g");
  assert.equal(headerSession("anthropic", new Headers({ "x-session-id": "  " })), null);
});

Deno.test("sessions: Claude Code's JSON user_id gives its session, never the device or account", () => {
  assert.equal(anthropicUserSession(claudeCodeUserId), "9f1c2d3e-session");
  const noSession = JSON.stringify({ device_id: "dev", account_uuid: "acc" });
  assert.equal(anthropicUserSession(noSession), undefined);
  assert.equal(anthropicUserSession(JSON.stringify({ session_id: "" })), undefined);
  // Older Claude Code and other clients: the string is the client's own id, as it is.
  const legacy = "user_abc_account_def_session_0123";
  assert.equal(anthropicUserSession(legacy), legacy);
  assert.equal(anthropicUserSession("{not json"), "{not json");
  assert.equal(anthropicUserSession(""), undefined);
  assert.equal(anthropicUserSession(undefined), undefined);
});

Deno.test("affinity: a pin belongs to its route, and is dropped only for its upstream", () => {
  const affinity = new Affinity();
  affinity.set("a", { sessionId: "s", upstream: "up2" });
  assert.equal(affinity.get("a", "s"), "up2");
  assert.equal(affinity.get("b", "s"), undefined);
  assert.equal(affinity.get("a", null), undefined);
  affinity.drop("a", { sessionId: "s", upstream: "up1" });
  assert.equal(affinity.get("a", "s"), "up2", "a drop for another upstream leaves the pin");
  affinity.drop("a", { sessionId: "s", upstream: "up2" });
  assert.equal(affinity.get("a", "s"), undefined);
  const bounded = new Affinity(2);
  for (const s of ["s1", "s2", "s3"]) bounded.set("a", { sessionId: s, upstream: "up" });
  assert.equal(bounded.get("a", "s1"), undefined, "the oldest pin went first");
  assert.equal(bounded.get("a", "s3"), "up");
});

// ---------------------------------------------------------------- end to end

async function sessionOf(gw: TestGateway, id: string): Promise<string | null> {
  return (await gw.row(id)).request.sessionId;
}

Deno.test("sessions: each client's own header or field names the recorded session", async () => {
  const up = startFakeUpstream({ fallback: () => chatWhole(answer) });
  const gw = await startTestGateway({
    upstreams: [{ id: "up", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
  });
  let n = 0;
  const ask = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const id = `sess-${++n}`;
    const res = await postJson(`${gw.url}${path}`, body, { ...headers, "x-request-id": id });
    assert.equal(res.status, 200, await res.clone().text());
    await res.text();
    return await sessionOf(gw, id);
  };
  const anthropic = (metadata?: unknown) => ({
    model: "smart",
    max_tokens: 16,
    messages,
    ...(metadata ? { metadata } : {}),
  });
  const chat = (extra: Record<string, unknown> = {}) => ({ model: "smart", messages, ...extra });
  const gemini = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };
  try {
    const cc = { "x-claude-code-session-id": "cc-header" };
    assert.equal(
      await ask("/v1/messages", anthropic({ user_id: claudeCodeUserId }), {
        ...cc,
        "x-session-id": "ours",
      }),
      "ours",
    );
    assert.equal(
      await ask("/v1/messages", anthropic({ user_id: claudeCodeUserId }), cc),
      "cc-header",
    );
    assert.equal(
      await ask("/v1/messages", anthropic({ user_id: claudeCodeUserId })),
      "9f1c2d3e-session",
    );
    assert.equal(await ask("/v1/messages", anthropic({ user_id: "legacy-user" })), "legacy-user");
    assert.equal(await ask("/v1/messages", anthropic()), null);

    assert.equal(
      await ask("/v1/chat/completions", chat({ prompt_cache_key: "pck" }), {
        session_id: "codex-conv",
      }),
      "codex-conv",
    );
    assert.equal(await ask("/v1/chat/completions", chat({ prompt_cache_key: "pck" })), "pck");
    assert.equal(await ask("/v1/chat/completions", chat({ user: "u-1" })), "u-1");
    assert.equal(
      await ask("/v1/responses", { model: "smart", input: "hi" }, { "session-id": "codex-new" }),
      "codex-new",
    );

    // Gemini CLI sends no session. A lone question gets none; a conversation gets one from its
    // prompt (tests/virtual/cache_affinity_test.ts).
    assert.equal(await ask("/v1beta/models/smart:generateContent", gemini), null);
    assert.equal(
      await ask("/v1beta/models/smart:generateContent", gemini, { "x-session-id": "g-1" }),
      "g-1",
    );
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("affinity: a session pinned on route A does not pull route B to A's upstream", async () => {
  const a = startFakeUpstream({ fallback: () => chatStream(answer) });
  const b = startFakeUpstream({ fallback: () => chatStream(answer) });
  const candidates = [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }];
  const config: ConfigInput = {
    failover: { failures_to_pause: 100, retries_per_candidate: 0 },
    upstreams: [
      { id: "up1", kind: "openai-chat", base_url: a.url },
      { id: "up2", kind: "openai-chat", base_url: b.url },
    ],
    routes: [{ model: "route-a", candidates }, { model: "route-b", candidates }],
  };
  const gw = await startTestGateway(config);
  const ask = async (model: string) => {
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model,
      stream: true,
      messages,
    }, { "x-session-id": "conv-1" });
    assert.match(await res.text(), /ok/);
  };
  try {
    a.enqueue(chatError(500, "hiccup"));
    await ask("route-a");
    assert.deepEqual([a.calls.length, b.calls.length], [1, 1], "route A failed over to up2");
    await ask("route-b");
    assert.deepEqual([a.calls.length, b.calls.length], [2, 1], "route B kept its own order");
    await ask("route-a");
    assert.deepEqual([a.calls.length, b.calls.length], [2, 2], "route A stayed on up2");
  } finally {
    await gw.stop();
    await a.close();
    await b.close();
  }
});

Deno.test("sessions: an id outside the request-id rule is kept as a short digest of itself", async () => {
  assert.equal(boundedSession("conv-42:a.b_c"), "conv-42:a.b_c");
  const huge = "u".repeat(5_000_000);
  const digest = boundedSession(huge);
  assert.match(digest, /^h:[0-9a-f]{16}$/);
  assert.equal(boundedSession(huge), digest, "the same value names the same session");
  assert.notEqual(boundedSession(huge + "v"), digest);
  assert.match(boundedSession("has spaces"), /^h:[0-9a-f]{16}$/);
  // End to end: a 1 MB OpenAI `user` field is recorded as the digest, not a 1 MB session id.
  const up = startFakeUpstream({ fallback: () => chatWhole(answer) });
  const gw = await startTestGateway({
    upstreams: [{ id: "up", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
  });
  try {
    const user = "x".repeat(1024 * 1024);
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages,
      user,
    }, { "x-request-id": "sess-huge" });
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(await sessionOf(gw, "sess-huge"), boundedSession(user));
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("sessions: a session stored as a digest is aborted by the name its client used", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const gw = await startTestGateway({
    failover: { idle_timeout_secs: 3600 },
    upstreams: [{ id: "up", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
  });
  const start = (id: string, opts: { header?: string; user?: string }) =>
    postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      messages,
      ...(opts.user ? { user: opts.user } : {}),
    }, { "x-request-id": id, ...(opts.header ? { "x-session-id": opts.header } : {}) });
  const abort = (session: string) =>
    fetch(`${gw.url}/sessions/${encodeURIComponent(session)}/abort`, { method: "POST" });
  try {
    const spaced = "conv with spaces"; // outside the request-id rule: kept as its digest
    const long = `u-${"x".repeat(300)}`; // over 128 characters: kept as its digest
    const running = [
      start("digest-header", { header: spaced }),
      start("digest-user", { user: long }),
      start("plain", { header: "plain-conv" }),
    ];
    await eventually(() =>
      ["digest-header", "digest-user", "plain"].every((id) => gw.registry.has(id))
    );
    assert.equal(gw.registry.get("digest-header")!.record.sessionId, boundedSession(spaced));

    const byHeaderName = await abort(spaced);
    assert.equal(byHeaderName.status, 200);
    assert.deepEqual((await byHeaderName.json()).requests, ["digest-header"]);
    const byBodyName = await abort(long);
    assert.equal(byBodyName.status, 200);
    assert.deepEqual((await byBodyName.json()).requests, ["digest-user"]);
    for (const res of await Promise.all(running.slice(0, 2))) {
      assert.equal(res.status, 400);
      await res.body?.cancel();
    }
    // The stored digest (what the admin page shows and its button sends) names it as well, and
    // an id inside the rule is its own name.
    const byDigest = await abort(boundedSession("plain-conv"));
    assert.equal(byDigest.status, 200);
    assert.deepEqual((await byDigest.json()).requests, ["plain"]);
    await (await running[2]!).body?.cancel();
  } finally {
    await gw.stop();
    await up.close();
  }
});
