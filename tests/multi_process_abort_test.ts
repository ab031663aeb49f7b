import assert from "node:assert/strict";
import { type Db, openDatabase } from "../db/client.ts";
import { FORWARDED_HEADER, PEER_ANSWER_MS } from "../gateway/live/abort_forwarding.ts";
import {
  PEER_SIGNATURE_WINDOW_MS,
  signPeerCall,
  verifyPeerCall,
} from "../gateway/live/peer_signature.ts";
import { freePort, postJson } from "./harness.ts";
import { chatStream, headersNever } from "./fake_upstreams/openai_chat_script.ts";
import { type Call, startFakeUpstream } from "./fake_upstreams/server.ts";
import { spawnGateway, startHungPeer } from "./spawn_gateway.ts";

/**
 * docs/design.md "Abort and disconnect"/§11 as an operator meets it: two gateway processes on one database file, at the real
 * time scale, so a running request's row reaches the database only after the one-second deferral.
 * Every abort here is sent to the instance that does not run the request, well inside that second.
 */

const PEER_SECRET = "multi-peer-secret";
const ADMIN = { authorization: "Bearer multi-admin" };
const KEY_A = { authorization: "Bearer key-a" };
const KEY_B = { authorization: "Bearer key-b" };
/** About 40 s of stream: an abort that does not reach it would leave it running past any wait. */
const SLOW = chatStream({ text: Array.from({ length: 200 }, (_, i) => `t${i} `) }, { gap: 200 });
const ABORTED_EVENT = /data: \{"error":.*gw\.request\.aborted/;

function ask(content: string, opts: { stream: boolean; user?: string }) {
  const body = { model: "smart", stream: opts.stream, messages: [{ role: "user", content }] };
  return opts.user ? { ...body, user: opts.user } : body;
}

async function startInstance(dir: string, opts: { config?: string }) {
  const port = freePort();
  const url = `http://127.0.0.1:${port}`;
  const spawned = await spawnGateway(dir, {
    env: {
      PULSEGATE_PORT: String(port),
      PULSEGATE_PUBLIC_URL: url,
      PULSEGATE_TIME_SCALE: "1",
      PULSEGATE_ADMIN_TOKEN: "multi-admin",
      PULSEGATE_PEER_SECRET: PEER_SECRET,
      PULSEGATE_KEY_A: "key-a",
      PULSEGATE_KEY_B: "key-b",
      ...(opts.config ? { PULSEGATE_CONFIG: opts.config } : {}),
    },
  });
  assert.equal(spawned.url, url);
  return spawned;
}

async function readToEnd(res: Response): Promise<string> {
  let text = "";
  for await (const piece of res.body!.pipeThrough(new TextDecoderStream())) text += piece;
  return text;
}

function abort(url: string, path: string, headers = ADMIN): Promise<Response> {
  return fetch(`${url}${path}`, { method: "POST", headers });
}

/** Waits (up to a generous bound) until the shared database holds the request's closed row. */
async function closedRow(db: Db, id: string) {
  for (let i = 0; i < 300; i++) {
    const rows = await db.client.execute({
      sql: `SELECT r.status, r.failure_source, r.error_code, i.url
        FROM requests r JOIN instances i ON i.id = r.instance_id
        WHERE r.id = ? AND r.state = 'closed'`,
      args: [id],
    });
    const row = rows.rows[0];
    if (row) return row;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`request ${id} was never recorded as ended`);
}

/** Waits until the upstream got `n` calls: each of those requests was accepted by its gateway. */
async function upstreamCalls(calls: Call[], n: number): Promise<void> {
  for (let i = 0; i < 600 && calls.length < n; i++) await new Promise((r) => setTimeout(r, 25));
  assert.equal(calls.length, n, "the requests reached the upstream");
}

Deno.test("two gateway processes: an abort at either stops a request from its first moment", async (t) => {
  const up = startFakeUpstream({
    fallback: (call) => {
      const json = call.json as { messages: { content: string }[] };
      return json.messages[0]?.content === "silent" ? headersNever : SLOW;
    },
  });
  const hung = startHungPeer();
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-multi-proc-" });
  const config = `${dir}/config.json`;
  await Deno.writeTextFile(
    config,
    JSON.stringify({
      upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
      keys: [{ id: "a", key_env: "PULSEGATE_KEY_A" }, { id: "b", key_env: "PULSEGATE_KEY_B" }],
      // The same turns and sessions come back after their aborts here: forwarding is the point,
      // not fences (tests/fence_test.ts).
      abort: { session_fence_secs: 0, turn_fence_secs: 0 },
    }),
  );
  const a = await startInstance(dir, { config });
  const b = await startInstance(dir, {}); // runs the config A stored
  const db = await openDatabase(`file:${dir}/pulsegate.db`, { busyTimeoutMs: 5_000 });
  try {
    await t.step("a request abort at B stops A's stream right after its headers", async () => {
      const res = await postJson(`${a.url}/v1/chat/completions`, ask("slow", { stream: true }), {
        ...KEY_A,
        "x-request-id": "slow-1",
      });
      assert.equal(res.status, 200);
      const control = await abort(b.url, "/request/slow-1/abort");
      assert.equal(control.status, 200);
      assert.deepEqual((await control.json()).requests, ["slow-1"]);
      assert.match(await readToEnd(res), ABORTED_EVENT);
      const row = await closedRow(db, "slow-1");
      assert.equal(row.error_code, "gw.request.aborted");
      assert.equal(row.failure_source, "aborted");
      assert.equal(row.url, a.url, "the row is A's");
    });

    await t.step("before A sent any header, with the id the client chose", async () => {
      const before = up.calls.length;
      const pending = postJson(`${a.url}/v1/chat/completions`, ask("silent", { stream: true }), {
        ...KEY_A,
        "x-request-id": "early-1",
      });
      await upstreamCalls(up.calls, before + 1);
      const control = await abort(b.url, "/request/early-1/abort");
      assert.equal(control.status, 200);
      assert.deepEqual((await control.json()).requests, ["early-1"]);
      const res = await pending;
      assert.equal(res.status, 400);
      assert.equal(res.headers.get("x-pulsegate-error"), "aborted");
      assert.equal((await res.json()).error.code, "gw.request.aborted");
      assert.equal(await up.calls[before]!.closed, "cancelled", "A dropped the upstream call");
      assert.equal((await closedRow(db, "early-1")).error_code, "gw.request.aborted");
    });

    await t.step("the key that made a request may abort it at B; another key may not", async () => {
      const res = await postJson(`${a.url}/v1/chat/completions`, ask("slow", { stream: true }), {
        ...KEY_A,
        "x-request-id": "keyed-1",
      });
      assert.equal(res.status, 200);
      const refused = await abort(b.url, "/request/keyed-1/abort", KEY_B);
      assert.equal(refused.status, 403, "A refuses key b");
      await refused.body?.cancel();
      const own = await abort(b.url, "/request/keyed-1/abort", KEY_A);
      assert.equal(own.status, 200);
      assert.deepEqual((await own.json()).requests, ["keyed-1"]);
      assert.match(await readToEnd(res), ABORTED_EVENT);
    });

    await t.step(
      "a session abort at B stops the session on both instances, nothing else",
      async () => {
        const start = (url: string, id: string, opts: { session?: string; user?: string }) =>
          postJson(`${url}/v1/chat/completions`, ask("slow", { stream: true, user: opts.user }), {
            ...KEY_A,
            "x-request-id": id,
            ...(opts.session ? { "x-session-id": opts.session } : {}),
          });
        const streams = await Promise.all([
          start(a.url, "sess-a1", { session: "sess" }),
          start(a.url, "sess-a2", { user: "sess" }), // the session named in the body (OpenAI `user`)
          start(b.url, "sess-b1", { session: "sess" }),
          start(a.url, "other-a1", { session: "other" }),
        ]);
        for (const res of streams) assert.equal(res.status, 200);
        const [a1, a2, b1, other] = streams as [Response, Response, Response, Response];
        const control = await abort(b.url, "/sessions/sess/abort");
        assert.equal(control.status, 200);
        assert.deepEqual((await control.json()).requests.sort(), ["sess-a1", "sess-a2", "sess-b1"]);
        for (const res of [a1, a2, b1]) assert.match(await readToEnd(res), ABORTED_EVENT);
        for (const id of ["sess-a1", "sess-a2", "sess-b1"]) {
          assert.equal((await closedRow(db, id)).error_code, "gw.request.aborted");
        }
        const reader = other.body!.pipeThrough(new TextDecoderStream()).getReader();
        assert.equal((await reader.read()).done, false, "the other session streams on");
        const stopOther = await abort(b.url, "/sessions/other/abort");
        assert.deepEqual((await stopOther.json()).requests, ["other-a1"]);
        let rest = "";
        for (let r = await reader.read(); !r.done; r = await reader.read()) rest += r.value;
        assert.match(rest, ABORTED_EVENT);
      },
    );

    await t.step(
      "a session id under two keys is two sessions: each key aborts only its own",
      async () => {
        const start = (url: string, id: string, key: Record<string, string>) =>
          postJson(`${url}/v1/chat/completions`, ask("slow", { stream: true }), {
            ...key,
            "x-request-id": id,
            "x-session-id": "shared",
          });
        const streams = await Promise.all([
          start(a.url, "shared-a-on-a", KEY_A),
          start(a.url, "shared-b-on-a", KEY_B),
          start(b.url, "shared-b-on-b", KEY_B),
        ]);
        for (const res of streams) assert.equal(res.status, 200);
        const [ownA, ofB1, ofB2] = streams as [Response, Response, Response];
        // Key a at B: its own request on A stops; key b's, on both instances, are not a's to stop.
        const byA = await abort(b.url, "/sessions/shared/abort", KEY_A);
        assert.equal(byA.status, 200, "never a 403 because key b joined the session id");
        assert.deepEqual((await byA.json()).requests, ["shared-a-on-a"]);
        assert.match(await readToEnd(ownA), ABORTED_EVENT);
        const again = await abort(b.url, "/sessions/shared/abort", KEY_A);
        assert.equal(again.status, 404, "nothing of key a's runs in it any more");
        assert.equal((await again.json()).error.code, "control.session_not_running");
        // The operator's session abort covers the id under every key.
        const byAdmin = await abort(a.url, "/sessions/shared/abort");
        assert.equal(byAdmin.status, 200);
        assert.deepEqual((await byAdmin.json()).requests.sort(), [
          "shared-b-on-a",
          "shared-b-on-b",
        ]);
        for (const res of [ofB1, ofB2]) assert.match(await readToEnd(res), ABORTED_EVENT);
      },
    );

    await t.step("a call marked forwarded without a valid peer signature is refused", async () => {
      const res = await postJson(`${a.url}/v1/chat/completions`, ask("slow", { stream: true }), {
        ...KEY_A,
        "x-request-id": "guarded-1",
      });
      assert.equal(res.status, 200);
      const path = "/request/guarded-1/abort";
      // A signed call names the instance it is for: A's id, new at each of A's starts.
      const idOf = async (url: string) =>
        String(
          (await db.client.execute({ sql: "SELECT id FROM instances WHERE url = ?", args: [url] }))
            .rows[0]!.id,
        );
      const body = JSON.stringify({ scope: { admin: true }, to: await idOf(a.url) });
      const forged = (headers: Record<string, string>, sent = body) =>
        fetch(`${a.url}${path}`, {
          method: "POST",
          headers: { [FORWARDED_HEADER]: "1", "content-type": "application/json", ...headers },
          body: sent,
        });
      const signed = (secret: string, now: number, sent = body) =>
        signPeerCall({ method: "POST", path, body: sent }, { secret, now });
      const forB = JSON.stringify({ scope: { admin: true }, to: await idOf(b.url) });
      const forNone = JSON.stringify({ scope: { admin: true } });
      const refusals = [
        await forged({}), // no signature, and a caller's admin token does not stand in for one
        await forged(ADMIN),
        await forged(await signed("wrong-secret", Date.now())),
        await forged(await signed(PEER_SECRET, Date.now() - 2 * PEER_SIGNATURE_WINDOW_MS)),
        // Correctly signed, but addressed to another instance, or to none.
        await forged(await signed(PEER_SECRET, Date.now(), forB), forB),
        await forged(await signed(PEER_SECRET, Date.now(), forNone), forNone),
      ];
      for (const refused of refusals) {
        assert.equal(refused.status, 401);
        assert.equal((await refused.json()).error.code, "control.unauthorized");
      }
      // A body other than the one signed (here: a key's scope turned into the operator's).
      const tampered = await fetch(`${a.url}${path}`, {
        method: "POST",
        headers: { [FORWARDED_HEADER]: "1", ...await signed(PEER_SECRET, Date.now()) },
        body: JSON.stringify({ scope: { admin: true }, from: "x" }),
      });
      assert.equal(tampered.status, 401);
      await tampered.body?.cancel();
      const valid = await signed(PEER_SECRET, Date.now());
      const genuine = await forged(valid);
      assert.equal(genuine.status, 200, "the same call signed with the shared secret stops it");
      assert.deepEqual((await genuine.json()).requests, ["guarded-1"]);
      const replayed = await forged(valid);
      assert.equal(replayed.status, 401, "a signed call is honoured once");
      await replayed.body?.cancel();
      assert.match(await readToEnd(res), ABORTED_EVENT);
    });

    await t.step(
      "the caller's credentials never reach a peer; the scope travels signed",
      async () => {
        const seen: Array<{ url: string; headers: Headers; body: string }> = [];
        const recorder = Deno.serve(
          { hostname: "127.0.0.1", port: 0, onListen() {} },
          async (req) => {
            seen.push({ url: req.url, headers: new Headers(req.headers), body: await req.text() });
            return Response.json({ error: { code: "control.request_not_running" } }, {
              status: 404,
            });
          },
        );
        await db.client.execute({
          sql: "INSERT INTO instances (id, started_at, heartbeat_at, url) VALUES (?, ?, ?, ?)",
          args: ["recorder", Date.now(), Date.now(), `http://127.0.0.1:${recorder.addr.port}`],
        });
        try {
          const res = await fetch(`${b.url}/request/nowhere-2/abort`, {
            method: "POST",
            headers: { ...KEY_A, "x-api-key": "key-a", "x-goog-api-key": "key-a" },
          });
          assert.equal(res.status, 404);
          await res.body?.cancel();
          assert.equal(seen.length, 1, "B asked the registered peer");
          const call = seen[0]!;
          for (const name of ["authorization", "x-api-key", "x-goog-api-key"]) {
            assert.equal(call.headers.get(name), null, `${name} is not passed on`);
          }
          const body = call.body;
          assert.deepEqual(JSON.parse(body).scope, { admin: false, keyId: "a" });
          assert.equal(JSON.parse(body).to, "recorder", "addressed to that one instance");
          const path = new URL(call.url).pathname;
          assert.equal(path, "/request/nowhere-2/abort");
          assert.ok(
            await verifyPeerCall({ method: "POST", path, body, headers: call.headers }, {
              secret: PEER_SECRET,
              now: Date.now(),
            }),
            "signed with the shared secret",
          );
        } finally {
          await db.client.execute({ sql: "DELETE FROM instances WHERE id = 'recorder'" });
          await recorder.shutdown();
        }
      },
    );

    await t.step(
      "an id that runs nowhere is 404 within the bound, even with a peer hung",
      async () => {
        const timed = async (path: string) => {
          const started = performance.now();
          const res = await abort(b.url, path);
          return { res, ms: performance.now() - started, body: await res.json() };
        };
        const fast = await timed("/request/nowhere/abort");
        assert.equal(fast.res.status, 404);
        assert.equal(fast.body.error.code, "control.request_not_running");
        assert.ok(fast.ms < PEER_ANSWER_MS * 3, `answered in ${fast.ms} ms`);

        await db.client.execute({
          sql: "INSERT INTO instances (id, started_at, heartbeat_at, url) VALUES (?, ?, ?, ?)",
          args: ["hung-peer", Date.now(), Date.now(), `http://127.0.0.1:${hung.addr.port}`],
        });
        try {
          const request = await timed("/request/nowhere/abort");
          assert.equal(request.res.status, 404);
          assert.equal(request.body.error.code, "control.request_not_running");
          assert.match(
            request.body.error.message,
            /hung-peer/,
            "names the peer that did not answer",
          );
          assert.ok(request.ms < PEER_ANSWER_MS * 3, `answered in ${request.ms} ms`);
          const session = await timed("/sessions/nowhere/abort");
          assert.equal(session.res.status, 404);
          assert.equal(session.body.error.code, "control.session_not_running");
          assert.ok(session.ms < PEER_ANSWER_MS * 3, `answered in ${session.ms} ms`);
        } finally {
          await db.client.execute({
            sql: "DELETE FROM instances WHERE id = ?",
            args: ["hung-peer"],
          });
        }
      },
    );
  } finally {
    db.close();
    a.child.kill("SIGTERM");
    b.child.kill("SIGTERM");
    await Promise.all([a.child.status, b.child.status, hung.shutdown(), up.close()]);
  }
  assert.equal((await a.child.status).code, 0, "A stops cleanly on SIGTERM");
  assert.equal((await b.child.status).code, 0, "B stops cleanly on SIGTERM");
});
