import assert from "node:assert/strict";
import { loadStoredConfig } from "../db/config_store.ts";
import { BODY_LIMIT_BYTES } from "../gateway/accept/read_body.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { serveDemoUpstream } from "../gateway/demo/demo.ts";
import { systemClock } from "../gateway/runtime/clock.ts";
import { ADMIN, adminFetch } from "./admin_helpers.ts";
import { lockDatabase } from "./db_helpers.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import type { FakeUpstream } from "./fake_upstreams/server.ts";
import { chatRoute, postJson, startTestGateway, type TestGateway, withGateway } from "./harness.ts";
import { rawRequest } from "./raw_http.ts";

const ask = { model: "smart", messages: [{ role: "user", content: "hi" }] };

/** One fake upstream answering every call, behind a chat route (or the config given). */
function withUpstream(
  run: (gw: TestGateway, up: FakeUpstream) => Promise<void>,
  opts: { env?: Record<string, string>; config?: (url: string) => ConfigInput } = {},
): Promise<void> {
  return withGateway(async (gw, [up]) => {
    up!.setHandler(() => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }));
    await run(gw, up!);
  }, { config: ([url]) => opts.config?.(url!) ?? chatRoute([url!]), env: opts.env });
}

const keyed = (url: string): ConfigInput => ({
  ...chatRoute([url]),
  keys: [{ id: "app", key_env: "APP_KEY" }],
});

Deno.test("open mode: a request naming another host (DNS rebinding) is refused on every surface", async () => {
  await withUpstream(async (gw, up) => {
    const evil = `evil.example:${gw.port}`;
    const read = await rawRequest(`${gw.url}/admin/api/config`, { host: evil });
    assert.equal(read.status, 403);
    assert.equal(JSON.parse(read.text).error.code, "gw.client.host_not_allowed");
    assert.equal(read.headers.get("x-pulsegate-error-code"), "gw.client.host_not_allowed");

    const before = JSON.stringify((await loadStoredConfig(gw.db))?.body);
    const patch = await rawRequest(`${gw.url}/admin/api/config`, {
      method: "PATCH",
      host: evil,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ failover: { idle_timeout_secs: 60 } }),
    });
    assert.equal(patch.status, 403);
    assert.equal(JSON.stringify((await loadStoredConfig(gw.db))?.body), before, "not applied");

    // The proxy answers in the client's own format, and nothing reaches the upstream.
    const proxied = await rawRequest(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      host: evil,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(ask),
    });
    assert.equal(proxied.status, 403);
    const error = JSON.parse(proxied.text).error;
    assert.equal(error.type, "permission_error");
    assert.match(error.message, /evil\.example/);
    const abort = await rawRequest(`${gw.url}/request/x/abort`, { method: "POST", host: evil });
    assert.equal(abort.status, 403);
    const metrics = await rawRequest(`${gw.url}/metrics`, { host: evil });
    assert.equal(metrics.status, 403);
    assert.equal(up.calls.length, 0);

    for (const host of [`localhost:${gw.port}`, `127.0.0.1:${gw.port}`, `[::1]:${gw.port}`]) {
      const ok = await rawRequest(`${gw.url}/admin/api/session`, { host });
      assert.equal(ok.status, 200, host);
    }
    const served = await rawRequest(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      host: `LOCALHOST:${gw.port}`,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(ask),
    });
    assert.equal(served.status, 200);
  });
});

Deno.test("with an admin token and gateway keys any host name is served, but not open metrics", async () => {
  await withUpstream(async (gw) => {
    const host = `gateway.example:${gw.port}`;
    const session = await rawRequest(`${gw.url}/admin/api/session`, {
      host,
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(session.status, 200);
    const proxied = await rawRequest(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      host,
      headers: { "content-type": "application/json", authorization: "Bearer k" },
      body: JSON.stringify(ask),
    });
    assert.equal(proxied.status, 200);
    // /metrics opened to loopback scrapers (PULSEGATE_METRICS_OPEN) needs no token: loopback names only.
    const metrics = await rawRequest(`${gw.url}/metrics`, { host });
    assert.equal(metrics.status, 403);
    const scraped = await rawRequest(`${gw.url}/metrics`, { host: `localhost:${gw.port}` });
    assert.equal(scraped.status, 200);
  }, { env: { PULSEGATE_ADMIN_TOKEN: ADMIN, APP_KEY: "k" }, config: keyed });
});

Deno.test("cross-site changes to the admin and control endpoints are refused, with or without a token", async () => {
  const envs: Record<string, string>[] = [{}, { PULSEGATE_ADMIN_TOKEN: ADMIN }];
  for (const env of envs) {
    await withUpstream(async (gw) => {
      const before = JSON.stringify(
        await adminFetch(gw, "/admin/api/config").then((r) => r.json()),
      );
      const patch = (headers: Record<string, string>) =>
        fetch(`${gw.url}/admin/api/config`, {
          method: "PATCH",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${ADMIN}`,
            ...headers,
          },
          body: JSON.stringify({ failover: { idle_timeout_secs: 60 } }),
        });
      const evil = await patch({ origin: "http://evil.example" });
      assert.equal(evil.status, 403);
      const body = await evil.json();
      assert.equal(body.error.code, "gw.client.cross_site");
      const marked = await patch({ "sec-fetch-site": "cross-site" });
      assert.equal(marked.status, 403);
      await marked.body?.cancel();
      const sibling = await patch({ "sec-fetch-site": "same-site" }); // another localhost port
      assert.equal(sibling.status, 403);
      await sibling.body?.cancel();
      const sandboxed = await patch({ origin: "null" });
      assert.equal(sandboxed.status, 403);
      await sandboxed.body?.cancel();
      const after = JSON.stringify(await adminFetch(gw, "/admin/api/config").then((r) => r.json()));
      assert.equal(after, before, "no refused change was applied");

      // A body-less cross-site POST is a "simple" request: no preflight would have stopped it.
      const abort = await fetch(`${gw.url}/sessions/s/abort`, {
        method: "POST",
        headers: { origin: "http://evil.example", authorization: `Bearer ${ADMIN}` },
      });
      assert.equal(abort.status, 403);
      await abort.body?.cancel();
      // The check reads the path the router serves: percent-encoding does not slip past it.
      for (const path of ["/%73essions/s/abort", "/%61dmin/api/config"]) {
        const encoded = await fetch(`${gw.url}${path}`, {
          method: path.includes("config") ? "PATCH" : "POST",
          headers: { origin: "http://evil.example", authorization: `Bearer ${ADMIN}` },
          body: path.includes("config")
            ? JSON.stringify({ failover: { idle_timeout_secs: 60 } })
            : null,
        });
        assert.equal(encoded.status, 403, path);
        assert.equal((await encoded.json()).error.code, "gw.client.cross_site", path);
      }

      // The page's own calls (same origin) and scripts (no Origin) go through.
      const own = await patch({ origin: gw.url, "sec-fetch-site": "same-origin" });
      assert.equal(own.status, 200);
      await own.body?.cancel();
      const script = await patch({});
      assert.equal(script.status, 200);
      await script.body?.cancel();
      // Reads are not changes: another site cannot read the answer anyway.
      const read = await fetch(`${gw.url}/admin/api/session`, {
        headers: { origin: "http://evil.example", authorization: `Bearer ${ADMIN}` },
      });
      assert.equal(read.status, 200);
      await read.body?.cancel();
    }, { env });
  }
});

Deno.test("proxy POSTs must be sent as JSON: 415 in the client's format, recorded", async () => {
  await withUpstream(async (gw, up) => {
    const post = (path: string, type: string | null) =>
      fetch(`${gw.url}${path}`, {
        method: "POST",
        headers: type === null ? {} : { "content-type": type },
        body: type === null ? new Blob([JSON.stringify(ask)]) : JSON.stringify(ask),
      });
    const plain = await post("/v1/chat/completions", "text/plain");
    assert.equal(plain.status, 415);
    const body = await plain.json();
    assert.equal(body.error.type, "invalid_request_error");
    assert.equal(body.error.code, "gw.client.unsupported_media_type");
    assert.match(body.error.message, /application\/json/);
    const { request } = await gw.row(plain.headers.get("x-request-id")!);
    assert.equal(request.status, 415);
    assert.equal(request.errorCode, "gw.client.unsupported_media_type");

    const anthropic = await post("/v1/messages", "application/x-www-form-urlencoded");
    assert.equal(anthropic.status, 415);
    assert.equal((await anthropic.json()).error.type, "invalid_request_error");
    const gemini = await post("/v1beta/models/smart:generateContent", null);
    assert.equal(gemini.status, 415);
    const geminiError = (await gemini.json()).error;
    assert.equal(geminiError.code, 415);
    assert.equal(geminiError.status, "INVALID_ARGUMENT");
    const counted = await post("/v1/messages/count_tokens", "text/plain;charset=UTF-8");
    assert.equal(counted.status, 415);
    await counted.body?.cancel();
    assert.equal(up.calls.length, 0);

    const withCharset = await post("/v1/chat/completions", "Application/JSON; charset=utf-8");
    assert.equal(withCharset.status, 200);
    await withCharset.body?.cancel();
  });
});

Deno.test("DELETE of a destination needs no body", async () => {
  await withUpstream(async (gw) => {
    const created = await adminFetch(gw, "/admin/api/destinations", {
      method: "POST",
      body: { id: "hook", kind: "webhook", url: "http://127.0.0.1:9/hook", enabled: false },
    });
    assert.equal(created.status, 201);
    await created.body?.cancel();
    const gone = await fetch(`${gw.url}/admin/api/destinations/hook`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(gone.status, 204);
    const list = await (await adminFetch(gw, "/admin/api/destinations")).json();
    assert.deepEqual(list.destinations, []);
  }, { env: { PULSEGATE_ADMIN_TOKEN: ADMIN } });
});

Deno.test("a valid config PUT while the database refuses writes answers 503 in JSON, not 500", async () => {
  await withUpstream(async (gw) => {
    const running = gw.state.config;
    const lock = await lockDatabase(`file:${gw.dir}/pulsegate.db`);
    let res: Response;
    try {
      res = await adminFetch(gw, "/admin/api/config", {
        method: "PUT",
        body: chatRoute(["http://127.0.0.1:9/v1"], { model: "other" }),
      });
    } finally {
      await lock.release();
    }
    assert.equal(res.status, 503);
    assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
    const body = await res.json();
    assert.equal(body.error.code, "admin.database_unavailable");
    assert.match(body.error.message, /database is unavailable.*not stored/);
    assert.equal(gw.state.config, running, "the running config is unchanged");

    const again = await adminFetch(gw, "/admin/api/config", {
      method: "PUT",
      body: chatRoute(["http://127.0.0.1:9/v1"], { model: "other" }),
    });
    assert.equal(again.status, 200);
    assert.equal(gw.state.config?.routes[0]?.model, "other");
  }, { env: { PULSEGATE_ADMIN_TOKEN: ADMIN } });
});

Deno.test("no *_env field may name the gateway's own PULSEGATE_ settings", async () => {
  const config = (upstream: Record<string, unknown>, keyEnv: string) => ({
    upstreams: [{ id: "up", base_url: "http://127.0.0.1:9", ...upstream }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
    keys: [{ id: "app", key_env: keyEnv }],
  });
  const problems = (raw: unknown) => {
    const checked = validateConfig(raw);
    return checked.ok ? [] : checked.problems.map((p) => `${p.path}: ${p.message}`);
  };
  const chat = { kind: "openai-chat", api_key_env: "PULSEGATE_ADMIN_TOKEN" };
  assert.deepEqual(problems(config(chat, "APP_KEY")), [
    "upstreams.0.api_key_env: may not name a PULSEGATE_ variable: those hold the gateway's own " +
    "settings and secrets (admin token, database token), which an upstream or destination " +
    "would be sent",
  ]);
  const bedrock = {
    kind: "bedrock",
    region: "us-east-1",
    access_key_env: "pulsegate_db_auth_token",
    secret_key_env: "AWS_SECRET_ACCESS_KEY",
    session_token_env: "PULSEGATE_KEY_X",
  };
  assert.deepEqual(problems(config(bedrock, "APP_KEY")).map((p) => p.split(":")[0]), [
    "upstreams.0.access_key_env",
    "upstreams.0.session_token_env",
  ]);
  const keyProblems = problems(config({ kind: "anthropic" }, "PULSEGATE_ADMIN_TOKEN"));
  assert.equal(keyProblems.length, 1);
  assert.match(keyProblems[0]!, /^keys\.0\.key_env: .*PULSEGATE_KEY_<NAME>/);
  // The documented convention for gateway keys stays valid.
  assert.deepEqual(problems(config({ kind: "anthropic" }, "PULSEGATE_KEY_APP1")), []);

  // Through the admin API: the save is refused with the problem at its path.
  await withUpstream(async (gw) => {
    const put = await adminFetch(gw, "/admin/api/config", {
      method: "PUT",
      body: config({ kind: "openai-chat", api_key_env: "PULSEGATE_DB_AUTH_TOKEN" }, "APP_KEY"),
    });
    assert.equal(put.status, 400);
    assert.equal((await put.json()).problems[0].path, "upstreams.0.api_key_env");
    const hook = await adminFetch(gw, "/admin/api/destinations", {
      method: "POST",
      body: {
        kind: "webhook",
        url: "http://127.0.0.1:9/hook",
        headers_env: { authorization: "PULSEGATE_ADMIN_TOKEN" },
      },
    });
    assert.equal(hook.status, 400);
    assert.equal((await hook.json()).problems[0].path, "headers_env.authorization");
  }, { env: { PULSEGATE_ADMIN_TOKEN: ADMIN } });
});

Deno.test("demo upstreams: bodies are capped and only the gateway itself is served", async () => {
  const gw = await startTestGateway(undefined);
  try {
    const demo = `${gw.url}/_demo/healthy/v1/chat/completions`;
    const huge = await fetch(demo, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new Uint8Array(BODY_LIMIT_BYTES + 1),
    });
    assert.equal(huge.status, 413);
    assert.equal((await huge.json()).error.type, "invalid_request_error");
    // The demo still works end to end: the gateway's own calls come from loopback.
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "demo",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(res.status, 200);
    assert.match((await res.json()).choices[0].message.content, /simulated healthy upstream/);
  } finally {
    await gw.stop();
  }
  const call = (hostname: string) =>
    serveDemoUpstream(
      new Request("http://127.0.0.1:8080/_demo/healthy/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "sim-healthy", messages: [] }),
      }),
      {
        clock: systemClock(),
        caller: { transport: "tcp", hostname, port: 40000 },
        self: "192.0.2.1",
      },
    );
  assert.equal((await call("192.0.2.7"))?.status, 403, "another machine");
  assert.equal((await call("192.0.2.1"))?.status, 200, "the gateway's own listen address");
  assert.equal((await call("::ffff:127.0.0.1"))?.status, 200);
});
