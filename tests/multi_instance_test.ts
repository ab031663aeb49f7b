import assert from "node:assert/strict";
import {
  chatRoute,
  eventually,
  freePort,
  postJson,
  startTestGateway,
  type TestGateway,
} from "./harness.ts";
import { headersNever } from "./fake_upstreams/openai_chat_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const ADMIN = { authorization: "Bearer shared-admin" };
const body = { model: "smart", messages: [{ role: "user", content: "hi" }] };

/** Waits until the instance runs the request; its row may not be in the database yet. */
async function running(gw: TestGateway, id: string): Promise<void> {
  for (let i = 0; i < 400 && !gw.registry.has(id); i++) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.ok(gw.registry.has(id), `request ${id} never started`);
}

Deno.test("two instances on one database: an abort at either reaches the owner", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-" });
  const env = { PULSEGATE_ADMIN_TOKEN: "shared-admin", PULSEGATE_PEER_SECRET: "peer-secret" };
  // Forwarding needs each instance's own address, so each gets a port chosen beforehand.
  const [portA, portB] = [freePort(), freePort()];
  const at = (port: number) => ({
    ...env,
    PULSEGATE_PUBLIC_URL: `http://127.0.0.1:${port}`,
  });
  // Each instance takes the other for dead after three missed heartbeats. At scale 0.01 that
  // is 300 ms, against beats 100 ms apart plus their unscaled database writes: a loaded
  // machine stalls that long, and then the live owner's rows are closed as interrupted. At 0.1
  // the beats are 1 s apart and a stall must last 3 s.
  const scale = 0.1;
  const a = await startTestGateway(chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } }), {
    dir,
    env: at(portA),
    port: portA,
    scale,
  });
  const b = await startTestGateway(undefined, { dir, env: at(portB), port: portB, scale });
  try {
    assert.ok(b.state.config, "the second instance runs the stored config");
    const one = postJson(`${a.url}/v1/chat/completions`, body, {
      "x-request-id": "on-a",
      "x-session-id": "s",
    });
    const two = postJson(`${b.url}/v1/chat/completions`, body, {
      "x-request-id": "on-b",
      "x-session-id": "s",
    });
    await running(a, "on-a");
    await running(b, "on-b");

    const viaB = await fetch(`${b.url}/request/on-a/abort`, { method: "POST", headers: ADMIN });
    assert.equal(viaB.status, 200);
    assert.deepEqual((await viaB.json()).requests, ["on-a"]);
    assert.equal((await one).status, 400);

    const unknown = await fetch(`${b.url}/request/nowhere/abort`, {
      method: "POST",
      headers: ADMIN,
    });
    assert.equal(unknown.status, 404);
    await unknown.body?.cancel();

    // A new turn of the session: the aborted one re-sent would meet its fence (fence_test.ts).
    const next = { ...body, messages: [{ role: "user", content: "hi again" }] };
    const three = postJson(`${a.url}/v1/chat/completions`, next, {
      "x-request-id": "on-a2",
      "x-session-id": "s",
    });
    await running(a, "on-a2");
    const session = await fetch(`${b.url}/sessions/s/abort`, { method: "POST", headers: ADMIN });
    assert.equal(session.status, 200);
    assert.deepEqual((await session.json()).requests.sort(), ["on-a2", "on-b"]);
    assert.equal((await two).status, 400);
    assert.equal((await three).status, 400);
  } finally {
    await a.stop();
    await b.stop();
    await up.close();
  }
});

Deno.test("a pause decided by one instance reaches the other at its next heartbeat", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-" });
  const config = chatRoute(["http://127.0.0.1:9", "http://127.0.0.1:9"], {
    failover: { pause_secs: 600, max_pause_secs: 600 },
  });
  const a = await startTestGateway(config, { dir });
  const b = await startTestGateway(undefined, { dir });
  try {
    assert.equal(b.cooldowns.isPaused("up1"), false);
    a.cooldowns.pauseFor("up1", 600);
    // Heartbeat every 10 s, scaled to 100 ms; the wait allows 100 of them.
    await eventually(() => b.cooldowns.isPaused("up1"));
    assert.equal(b.cooldowns.isPaused("up1"), true);
  } finally {
    await a.stop();
    await b.stop();
  }
});

Deno.test("without a peer secret an abort reaches only the instance's own requests", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-" });
  const scale = 0.1; // see the first test
  const [portA, portB] = [freePort(), freePort()];
  // Public addresses, but no secret: neither registers where it may be reached.
  const env = (port: number) => ({
    PULSEGATE_ADMIN_TOKEN: "shared-admin",
    PULSEGATE_PUBLIC_URL: `http://127.0.0.1:${port}`,
  });
  const config = chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } });
  const a = await startTestGateway(config, { dir, env: env(portA), port: portA, scale });
  const b = await startTestGateway(undefined, { dir, env: env(portB), port: portB, scale });
  try {
    const one = postJson(`${a.url}/v1/chat/completions`, body, { "x-request-id": "only-a" });
    await running(a, "only-a");
    const viaB = await fetch(`${b.url}/request/only-a/abort`, { method: "POST", headers: ADMIN });
    assert.equal(viaB.status, 404, "B cannot reach A");
    await viaB.body?.cancel();
    assert.ok(a.registry.has("only-a"), "the request runs on");
    const urls = await a.db.client.execute("SELECT url FROM instances WHERE url IS NOT NULL");
    assert.equal(urls.rows.length, 0, "no instance offers itself to peers");
    const atA = await fetch(`${a.url}/request/only-a/abort`, { method: "POST", headers: ADMIN });
    assert.equal(atA.status, 200);
    await atA.body?.cancel();
    assert.equal((await one).status, 400);
  } finally {
    await a.stop();
    await b.stop();
    await up.close();
  }
});

/** Two instances on one database, each with its own address and the shared peer secret. */
async function twoPeers(upstreamUrl: string) {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-" });
  const [portA, portB] = [freePort(), freePort()];
  const env = (port: number) => ({
    PULSEGATE_ADMIN_TOKEN: "shared-admin",
    PULSEGATE_PEER_SECRET: "peer-secret",
    PULSEGATE_PUBLIC_URL: `http://127.0.0.1:${port}`,
  });
  const scale = 0.1; // see the first test
  const config = chatRoute([upstreamUrl], { failover: { idle_timeout_secs: 3600 } });
  const a = await startTestGateway(config, { dir, env: env(portA), port: portA, scale });
  const b = await startTestGateway(undefined, { dir, env: env(portB), port: portB, scale });
  return { a, b, dir, env, scale };
}

Deno.test("a session stored as a digest is aborted at another instance by its client's name", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const { a, b } = await twoPeers(up.url);
  try {
    const name = "conv with spaces"; // outside the request-id rule: A keeps its digest
    const one = postJson(`${a.url}/v1/chat/completions`, body, {
      "x-request-id": "digest-on-a",
      "x-session-id": name,
    });
    await running(a, "digest-on-a");
    const viaB = await fetch(`${b.url}/sessions/${encodeURIComponent(name)}/abort`, {
      method: "POST",
      headers: ADMIN,
    });
    assert.equal(viaB.status, 200);
    assert.deepEqual((await viaB.json()).requests, ["digest-on-a"]);
    assert.equal((await one).status, 400);
  } finally {
    await a.stop();
    await b.stop();
    await up.close();
  }
});

/** An on-path observer: passes every call on to `target` and keeps a copy of it. */
function recordingRelay() {
  const seen: Array<{ path: string; headers: Headers; body: string }> = [];
  let target = "";
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    const body = await req.text();
    seen.push({ path, headers: new Headers(req.headers), body });
    const res = await fetch(`${target}${path}`, { method: req.method, headers: req.headers, body });
    return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    to: (url: string) => (target = url),
    close: () => server.shutdown(),
  };
}

Deno.test("a captured peer abort is refused by a restarted instance and by any other", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const relay = recordingRelay();
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-" });
  const env = (url: string) => ({
    PULSEGATE_ADMIN_TOKEN: "shared-admin",
    PULSEGATE_PEER_SECRET: "peer-secret",
    PULSEGATE_PUBLIC_URL: url,
  });
  const scale = 0.1; // see the first test
  const config = {
    ...chatRoute([up.url], { failover: { idle_timeout_secs: 3600 } }),
    // The session is used again after its abort: no fence here (fence_test.ts has them).
    abort: { session_fence_secs: 0 },
  };
  // A is reached by its peers only through the relay, which keeps a copy of each call.
  let a = await startTestGateway(config, { dir, env: env(relay.url), scale });
  relay.to(a.url);
  const portB = freePort();
  const b = await startTestGateway(undefined, {
    dir,
    env: env(`http://127.0.0.1:${portB}`),
    port: portB,
    scale,
  });
  const start = (gw: TestGateway, id: string) =>
    postJson(`${gw.url}/v1/chat/completions`, body, { "x-request-id": id, "x-session-id": "s" });
  try {
    const first = start(a, "before-restart");
    await running(a, "before-restart");
    const genuine = await fetch(`${b.url}/sessions/s/abort`, { method: "POST", headers: ADMIN });
    assert.equal(genuine.status, 200);
    assert.deepEqual((await genuine.json()).requests, ["before-restart"]);
    assert.equal((await first).status, 400);
    assert.equal(relay.seen.length, 1, "B's signed call to A went through the relay");
    const captured = relay.seen[0]!;
    const replay = (gw: TestGateway) =>
      fetch(`${gw.url}${captured.path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-pulsegate-forwarded": captured.headers.get("x-pulsegate-forwarded")!,
          "x-pulsegate-peer-signature": captured.headers.get("x-pulsegate-peer-signature")!,
          "x-pulsegate-peer-timestamp": captured.headers.get("x-pulsegate-peer-timestamp")!,
        },
        body: captured.body,
      });

    // A restarts well inside the signature's 30 s window, as a new instance on the same address.
    await a.stop();
    a = await startTestGateway(undefined, { dir, env: env(relay.url), scale });
    relay.to(a.url);
    const second = start(a, "after-restart");
    const onB = start(b, "on-b");
    await running(a, "after-restart");
    await running(b, "on-b");
    for (const [gw, id] of [[a, "after-restart"], [b, "on-b"]] as const) {
      const replayed = await replay(gw);
      assert.equal(replayed.status, 401, `the replay to ${id}'s instance is refused`);
      assert.equal((await replayed.json()).error.code, "control.unauthorized");
      assert.ok(gw.registry.has(id), `${id} runs on`);
    }

    // The restarted A still takes genuine aborts from B, addressed to it.
    const again = await fetch(`${b.url}/sessions/s/abort`, { method: "POST", headers: ADMIN });
    assert.equal(again.status, 200);
    assert.deepEqual((await again.json()).requests.sort(), ["after-restart", "on-b"]);
    assert.equal((await second).status, 400);
    assert.equal((await onB).status, 400);
  } finally {
    await a.stop();
    await b.stop();
    await relay.close();
    await up.close();
  }
});
