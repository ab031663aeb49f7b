import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import {
  chatRoute,
  eventually,
  freePort,
  postJson,
  startTestGateway,
  type TestGateway,
} from "./harness.ts";
import { chatStream, chatWhole, contentThenSilence } from "./fake_upstreams/openai_chat_script.ts";
import { type Call, type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";

/**
 * docs/design.md "Abort and disconnect": an operator's abort leaves a fence, so the agent that
 * re-sends the stopped turn (or anything of the stopped session) is refused before any upstream
 * call, on every instance, across restarts, until the fence expires or is lifted.
 */

const ADMIN = { authorization: "Bearer fence-admin" };
const KEY_A = { authorization: "Bearer key-a" };
const KEY_B = { authorization: "Bearer key-b" };
const ENV = {
  PULSEGATE_ADMIN_TOKEN: "fence-admin",
  PULSEGATE_KEY_A: "key-a",
  PULSEGATE_KEY_B: "key-b",
};
/** An hour, scaled to 36 s: no fence runs out while a test looks at it. */
const LONG = { session_fence_secs: 3600, turn_fence_secs: 3600 };

const TURN = [
  { role: "system", content: "you are terse" },
  { role: "user", content: "write the file" },
];
const NEXT_TURN = [...TURN, { role: "assistant", content: "done" }, {
  role: "user",
  content: "now test it",
}];

function config(url: string, abort: ConfigInput["abort"] = LONG): ConfigInput {
  return {
    ...chatRoute([url], { failover: { idle_timeout_secs: 3600 } }),
    keys: [{ id: "a", key_env: "PULSEGATE_KEY_A" }, { id: "b", key_env: "PULSEGATE_KEY_B" }],
    abort,
  };
}

/** Streams a little and then hangs while streamed; answers whole otherwise. */
function answering(call: Call) {
  const json = call.json as { stream?: boolean };
  return json.stream ? contentThenSilence("partial") : chatWhole({ text: ["answered"] });
}

async function withFences(
  run: (gw: TestGateway, up: FakeUpstream) => Promise<void>,
  opts: { abort?: ConfigInput["abort"] } = {},
): Promise<void> {
  const up = startFakeUpstream({ fallback: answering });
  try {
    await using gw = await startTestGateway(config(up.url, opts.abort), { env: ENV });
    await run(gw, up);
  } finally {
    await up.close();
  }
}

function chat(
  gw: TestGateway,
  opts: {
    messages?: unknown[];
    stream?: boolean;
    key?: Record<string, string>;
    session?: string;
    id?: string;
    extra?: Record<string, unknown>;
  },
): Promise<Response> {
  const body = {
    model: "smart",
    stream: opts.stream ?? false,
    messages: opts.messages ?? TURN,
    ...opts.extra,
  };
  return postJson(`${gw.url}/v1/chat/completions`, body, {
    ...(opts.key ?? KEY_A),
    ...(opts.session ? { "x-session-id": opts.session } : {}),
    ...(opts.id ? { "x-request-id": opts.id } : {}),
  });
}

/** Starts a streamed request and reads until its first content: it runs. */
async function runningStream(
  gw: TestGateway,
  opts: { id: string; session?: string; key?: Record<string, string>; messages?: unknown[] },
): Promise<ReadableStreamDefaultReader<string>> {
  const res = await chat(gw, { ...opts, stream: true });
  assert.equal(res.status, 200);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("partial")) text += (await reader.read()).value ?? "";
  return reader;
}

async function drain(reader: ReadableStreamDefaultReader<string>): Promise<string> {
  let text = "";
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += r.value;
  return text;
}

function abort(gw: TestGateway, path: string, headers = ADMIN): Promise<Response> {
  return fetch(`${gw.url}${path}`, { method: "POST", headers });
}

/**
 * The status a fence's refusal has in each client format: the one the coding agents take as final
 * (docs/design.md "Abort and disconnect"), while the row keeps the code table's.
 */
const FENCED_STATUS = { "openai-chat": 400, "anthropic": 499 } as const;

/** Asserts a fence's refusal: its code, its client format's final status, and what it says. */
async function assertFenced(
  res: Response,
  opts: {
    code: "gw.session.fenced" | "gw.turn.fenced";
    fence: string;
    format?: keyof typeof FENCED_STATUS;
  },
): Promise<void> {
  assert.equal(res.headers.get("x-pulsegate-error-code"), opts.code);
  assert.equal(res.status, FENCED_STATUS[opts.format ?? "openai-chat"]);
  assert.equal(res.headers.get("x-pulsegate-error"), "aborted");
  assert.equal(res.headers.get("x-should-retry"), "false");
  const text = await res.text();
  assert.match(
    text,
    /an operator stopped (session '[^']+'|this turn) until \d{4}-\d\d-\d\dT[\d:.]+Z/,
  );
  assert.match(text, new RegExp(`fence ${opts.fence}`));
}

Deno.test("a session abort fences the session: a re-send is refused before any upstream call, recorded, not billed", async () => {
  await withFences(async (gw, up) => {
    const reader = await runningStream(gw, { id: "s-running", session: "s1" });
    const control = await abort(gw, "/sessions/s1/abort");
    assert.equal(control.status, 200);
    const answer = await control.json();
    assert.deepEqual(answer.requests, ["s-running"]);
    assert.equal(answer.fence.kind, "session");
    assert.match(answer.fence.expires_at, /^\d{4}-\d\d-\d\dT[\d:.]+Z$/);
    const expires = Date.parse(answer.fence.expires_at) - Date.now();
    assert.ok(expires > 30_000 && expires <= 36_000, "3600 s, scaled to 36 s");
    assert.match(await drain(reader), /gw\.request\.aborted/);
    const calls = up.calls.length;

    // The agent's retry, 35 ms later: not streamed, other limits, same session.
    const retry = await chat(gw, { session: "s1", id: "s-retry", extra: { max_tokens: 7 } });
    await assertFenced(retry, { code: "gw.session.fenced", fence: answer.fence.id });
    const otherKey = await chat(gw, { session: "s1", key: KEY_B, messages: NEXT_TURN });
    await assertFenced(otherKey, { code: "gw.session.fenced", fence: answer.fence.id });
    assert.equal(up.calls.length, calls, "no fenced request reached the upstream");

    const { request, attempts } = await gw.row("s-retry");
    assert.equal(request.errorCode, "gw.session.fenced");
    assert.equal(request.failureSource, "aborted");
    assert.equal(request.outcome, "error");
    assert.match(request.errorMessage ?? "", new RegExp(answer.fence.id));
    assert.equal(request.costUsd, null, "not billed");
    assert.equal(request.upstream, null);
    assert.deepEqual(attempts, []);

    const other = await chat(gw, { session: "s2" });
    assert.equal(other.status, 200, "another session is answered");
    await other.body?.cancel();
    assert.equal(up.calls.length, calls + 1);
    assert.equal(gw.metrics.fenceRefusals.get({ kind: "session" }), 2);
    assert.equal(gw.metrics.fenceRefusals.get({ kind: "turn" }), 0);
    assert.match(gw.metrics.render(), /pulsegate_fences_active\{kind="session"\} 1/);
    assert.equal(gw.slots.inFlight("up1"), 0, "the abort freed the slot; the refusals took none");
  });
});

Deno.test("a key's session abort fences only that key's requests of the session", async () => {
  await withFences(async (gw, up) => {
    // Nothing of the session runs: a session abort between two turns fences it all the same.
    const control = await abort(gw, "/sessions/shared/abort", KEY_A);
    assert.equal(control.status, 200);
    const { requests, fence } = await control.json();
    assert.deepEqual(requests, []);
    const own = await chat(gw, { session: "shared" });
    await assertFenced(own, { code: "gw.session.fenced", fence: fence.id });
    const ofB = await chat(gw, { session: "shared", key: KEY_B });
    assert.equal(ofB.status, 200, "key b's session of the same name is another session");
    await ofB.body?.cancel();
    assert.equal(up.calls.length, 1);
  });
});

Deno.test("a request abort fences that turn: re-sent whole with other max_tokens, or in another format, refused; a new turn passes", async () => {
  await withFences(async (gw, up) => {
    const reader = await runningStream(gw, { id: "t-running", session: "t1" });
    const control = await abort(gw, "/request/t-running/abort", KEY_A);
    assert.equal(control.status, 200, "a key may abort its own request");
    const answer = await control.json();
    assert.deepEqual(answer.requests, ["t-running"]);
    assert.equal(answer.fence.kind, "turn");
    await drain(reader);
    const calls = up.calls.length;

    const retry = await chat(gw, {
      session: "t1",
      id: "t-retry",
      extra: { max_tokens: 4096, temperature: 0.1, user: "someone" },
    });
    await assertFenced(retry, { code: "gw.turn.fenced", fence: answer.fence.id });
    const asAnthropic = await postJson(`${gw.url}/v1/messages`, {
      model: "smart",
      max_tokens: 100,
      system: TURN[0]!.content,
      messages: [{ role: "user", content: [{ type: "text", text: TURN[1]!.content }] }],
    }, { ...KEY_A, "x-session-id": "t1" });
    await assertFenced(asAnthropic, {
      code: "gw.turn.fenced",
      fence: answer.fence.id,
      format: "anthropic",
    });
    assert.equal(up.calls.length, calls, "the fenced retries reached no upstream");
    const { request } = await gw.row("t-retry");
    assert.equal(request.errorCode, "gw.turn.fenced");
    assert.equal(request.costUsd, null);

    const next = await chat(gw, { session: "t1", messages: NEXT_TURN });
    assert.equal(next.status, 200, "a new turn of the session is answered");
    await next.body?.cancel();
    const ofB = await chat(gw, { session: "t1", key: KEY_B });
    assert.equal(ofB.status, 200, "another key's same turn is not the aborted one");
    await ofB.body?.cancel();
    assert.equal(up.calls.length, calls + 2);
    assert.equal(gw.metrics.fenceRefusals.get({ kind: "turn" }), 2);
  });
});

Deno.test("a request without a session is fenced by key and conversation", async () => {
  await withFences(async (gw, up) => {
    const lone = [{ role: "user", content: "one lone question" }];
    const reader = await runningStream(gw, { id: "lone", messages: lone });
    assert.equal(gw.registry.get("lone")!.record.sessionId, null);
    const { fence } = await (await abort(gw, "/request/lone/abort")).json();
    await drain(reader);
    const again = await chat(gw, { messages: lone });
    await assertFenced(again, { code: "gw.turn.fenced", fence: fence.id });
    const ofB = await chat(gw, { messages: lone, key: KEY_B });
    assert.equal(ofB.status, 200);
    await ofB.body?.cancel();
    assert.equal(up.calls.length, 2);
  });
});

Deno.test("fences are listed to the admin token only, and a lift lets the session answer again", async () => {
  await withFences(async (gw, up) => {
    const { fence } = await (await abort(gw, "/sessions/lift-me/abort")).json();
    const listed = await fetch(`${gw.url}/admin/api/fences`, { headers: ADMIN });
    assert.equal(listed.status, 200);
    const { at, fences, fenceSecs } = await listed.json();
    assert.equal(typeof at, "number");
    assert.deepEqual(fenceSecs, { session: 3600, turn: 3600 }, "the durations in force");
    assert.equal(fences.length, 1);
    const [view] = fences;
    assert.deepEqual(Object.keys(view).sort(), [
      "createdAt",
      "expiresAt",
      "id",
      "instanceId",
      "keyId",
      "kind",
      "requestId",
      "sessionId",
    ]);
    assert.equal(view.id, fence.id);
    assert.equal(view.kind, "session");
    assert.equal(view.keyId, null, "the admin token's fence refuses every key");
    assert.equal(view.sessionId, "lift-me");
    assert.equal(view.instanceId, gw.instanceId);
    assert.equal(new Date(view.expiresAt).toISOString(), fence.expires_at);

    for (const method of ["GET", "DELETE"]) {
      const path = method === "GET" ? "/admin/api/fences" : `/admin/api/fences/${fence.id}`;
      const byKey = await fetch(`${gw.url}${path}`, { method, headers: KEY_A });
      assert.equal(byKey.status, 401, `a gateway key may not ${method} fences`);
      await byKey.body?.cancel();
    }
    await assertFenced(await chat(gw, { session: "lift-me" }), {
      code: "gw.session.fenced",
      fence: fence.id,
    });
    const lift = await fetch(`${gw.url}/admin/api/fences/${fence.id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    assert.equal(lift.status, 200);
    assert.deepEqual(await lift.json(), { id: fence.id, lifted: true });
    const answered = await chat(gw, { session: "lift-me" });
    assert.equal(answered.status, 200);
    await answered.body?.cancel();
    assert.equal(up.calls.length, 1);
    const again = await fetch(`${gw.url}/admin/api/fences/${fence.id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    assert.equal(again.status, 404);
    assert.equal((await again.json()).error.code, "admin.fence_not_found");
    const empty = await (await fetch(`${gw.url}/admin/api/fences`, { headers: ADMIN })).json();
    assert.deepEqual(empty.fences, []);
  });
});

Deno.test("with fences off an abort leaves none: fence null, the re-send answered", async () => {
  await withFences(async (gw, up) => {
    const reader = await runningStream(gw, { id: "off-1", session: "off" });
    const answer = await (await abort(gw, "/request/off-1/abort")).json();
    assert.deepEqual(answer, { requests: ["off-1"], fence: null });
    await drain(reader);
    const idle = await abort(gw, "/sessions/idle/abort");
    assert.equal(idle.status, 404, "nothing ran and nothing is fenced");
    assert.equal((await idle.json()).error.code, "control.session_not_running");
    const again = await chat(gw, { session: "off" });
    assert.equal(again.status, 200);
    await again.body?.cancel();
    assert.equal(up.calls.length, 2);
  }, { abort: { session_fence_secs: 0, turn_fence_secs: 0 } });
});

Deno.test("a fence holds across a restart: a new gateway on the same database refuses", async () => {
  const up = startFakeUpstream({ fallback: answering });
  try {
    const first = await startTestGateway(config(up.url), { env: ENV });
    const { fence } = await (await abort(first, "/sessions/kept/abort")).json();
    await first.stop();
    await using second = await startTestGateway(undefined, { env: ENV, dir: first.dir });
    await assertFenced(await chat(second, { session: "kept" }), {
      code: "gw.session.fenced",
      fence: fence.id,
    });
    assert.equal(up.calls.length, 0);
  } finally {
    await up.close();
  }
});

/** Two instances on one database, each reachable by the other (multi_instance_test.ts). */
async function twoInstances(upstreamUrl: string, opts: { forwarding: boolean }) {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-fence-" });
  const [portA, portB] = [freePort(), freePort()];
  const env = (port: number) => ({
    ...ENV,
    ...(opts.forwarding ? { PULSEGATE_PEER_SECRET: "fence-peers" } : {}),
    PULSEGATE_PUBLIC_URL: `http://127.0.0.1:${port}`,
  });
  // As multi_instance_test.ts: at 0.1 a peer counts as gone after 3 s of silence, not 0.3 s.
  // The fence reload runs every 2 s, 200 ms at this scale.
  const scale = 0.1;
  const a = await startTestGateway(config(upstreamUrl), {
    dir,
    env: env(portA),
    port: portA,
    scale,
  });
  const b = await startTestGateway(undefined, { dir, env: env(portB), port: portB, scale });
  return { a, b };
}

Deno.test("another instance holds a session fence from the forwarded abort, and learns a lift at its reload", async () => {
  const up = startFakeUpstream({ fallback: answering });
  const { a, b } = await twoInstances(up.url, { forwarding: true });
  try {
    // Running on B: the abort taken at A is forwarded to B with the fence.
    const reader = await runningStream(b, { id: "on-b", session: "multi" });
    const control = await abort(a, "/sessions/multi/abort");
    const answer = await control.json();
    assert.deepEqual(answer.requests, ["on-b"]);
    await drain(reader);
    const calls = up.calls.length;
    await assertFenced(await chat(b, { session: "multi" }), {
      code: "gw.session.fenced",
      fence: answer.fence.id,
    });
    assert.equal(up.calls.length, calls, "B refused the retry with no upstream call");
    const lift = await fetch(`${b.url}/admin/api/fences/${answer.fence.id}`, {
      method: "DELETE",
      headers: ADMIN,
    });
    assert.equal(lift.status, 200);
    await lift.body?.cancel();
    await eventually(async () => {
      const res = await chat(a, { session: "multi" });
      await res.body?.cancel();
      return res.status === 200;
    }, { what: "A reads the lift" });
  } finally {
    await a.stop();
    await b.stop();
    await up.close();
  }
});

Deno.test("without forwarding another instance learns a turn fence from the database within the reload window", async () => {
  const up = startFakeUpstream({ fallback: answering });
  const { a, b } = await twoInstances(up.url, { forwarding: false });
  try {
    const reader = await runningStream(a, { id: "turn-on-a", session: "tm" });
    const { fence } = await (await abort(a, "/request/turn-on-a/abort")).json();
    await drain(reader);
    await eventually(() => b.fences.set.get(fence.id) !== undefined, { what: "B read it" });
    await assertFenced(await chat(b, { session: "tm" }), {
      code: "gw.turn.fenced",
      fence: fence.id,
    });
    assert.equal(up.calls.length, 1, "only the aborted request reached the upstream");
  } finally {
    await a.stop();
    await b.stop();
    await up.close();
  }
});

Deno.test("the abort that stops a request answers once its fence holds: a retry at once is refused", async () => {
  await withFences(async (gw, up) => {
    up.setHandler(() => chatStream({ text: Array.from({ length: 50 }, () => "x") }, { gap: 200 }));
    const res = await chat(gw, { id: "quick", stream: true, session: "q" });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    await reader.read();
    // The agent re-sends the moment its stream ends, before the abort's own answer is read.
    const control = abort(gw, "/request/quick/abort");
    await drain(reader);
    const retry = await chat(gw, { session: "q" });
    assert.equal(retry.headers.get("x-pulsegate-error-code"), "gw.turn.fenced");
    await retry.body?.cancel();
    assert.equal((await (await control).json()).fence.kind, "turn");
    assert.equal(up.calls.length, 1);
  });
});
