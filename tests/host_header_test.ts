import assert from "node:assert/strict";
import { ADMIN } from "./admin_helpers.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { chatRoute, withGateway } from "./harness.ts";
import { rawRequest } from "./raw_http.ts";

/**
 * docs/security.md "Host headers": the runtime builds a request's URL from the Host header as
 * sent, and the router reads the path out of that URL, so a Host carrying a path, query or
 * anything else than `host[:port]` is answered 400 before any route is chosen.
 */

const ask = { model: "smart", messages: [{ role: "user", content: "hi" }] };

function assertBadHost(answer: { status: number; headers: Headers; text: string }): void {
  assert.equal(answer.status, 400);
  assert.equal(answer.headers.get("x-pulsegate-error-code"), "gw.client.bad_host");
  assert.ok(answer.headers.get("x-request-id"));
  const error = JSON.parse(answer.text).error;
  assert.equal(error.code, "gw.client.bad_host");
  assert.match(error.message, /Host/);
}

Deno.test("a path inside the Host header is refused, not routed", async () => {
  await withGateway(async (gw, [up]) => {
    up!.setHandler(() => chatWhole({ text: ["ok"], usage: { input: 1, output: 1 } }));
    // GET /api/session was answered from /admin/api/session: the Host's path was prepended.
    const session = await rawRequest(`${gw.url}/api/session`, { host: "localhost/admin" });
    assertBadHost(session);
    assert.doesNotMatch(session.text, /tokenRequired/);
    // The same trick on a change: nothing reaches the abort endpoints or the proxy.
    const abort = await rawRequest(`${gw.url}/abort`, {
      method: "POST",
      host: `127.0.0.1:${gw.port}/request/x`,
    });
    assertBadHost(abort);
    const proxied = await rawRequest(`${gw.url}/completions`, {
      method: "POST",
      host: "localhost/v1/chat",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(ask),
    });
    assertBadHost(proxied);
    assert.equal(up!.calls.length, 0);
  });
});

Deno.test("only host[:port] is a Host: names, IPv4, bracketed IPv6, an optional port", async () => {
  await withGateway(async (gw) => {
    const bad = [
      "localhost?x=1",
      "localhost#frag",
      "user@localhost",
      "local host",
      "localhost\\admin",
      "localhost:",
      `localhost:${gw.port}:1`,
      "localhost:99999",
      "localhost:http",
      "%6cocalhost",
      "[::1",
      "::1",
      "[::g]",
      "999.0.0.1",
      "a..b",
      ".localhost",
      `${"a".repeat(64)}.example`,
      `${"abcdefghi.".repeat(26)}example`, // 266 characters
      "",
    ];
    for (const host of bad) {
      const answer = await rawRequest(`${gw.url}/healthz`, { host });
      assert.equal(answer.status, 400, JSON.stringify(host));
      assertBadHost(answer);
    }
    // Open mode (no admin token, no keys) serves loopback names, which all pass.
    const good = [
      `localhost:${gw.port}`,
      "localhost",
      `127.0.0.1:${gw.port}`,
      `[::1]:${gw.port}`,
      `LOCALHOST.:${gw.port}`,
    ];
    for (const host of good) {
      const answer = await rawRequest(`${gw.url}/admin/api/session`, { host });
      assert.equal(answer.status, 200, host);
    }
    // No Host at all (HTTP/1.0): the runtime builds the URL from its own address.
    const none = await rawRequest(`${gw.url}/admin/api/session`, { host: null });
    assert.equal(none.status, 200);
  });
});

Deno.test("with an admin token and keys any well-formed name is served; a malformed one is not", async () => {
  await withGateway(async (gw) => {
    const auth = { authorization: `Bearer ${ADMIN}` };
    for (
      const host of ["gw_1.internal:8080", "xn--bcher-kva.example", "10.0.0.7:443", "[fd00::7]"]
    ) {
      const answer = await rawRequest(`${gw.url}/admin/api/session`, { host, headers: auth });
      assert.equal(answer.status, 200, host);
    }
    const answer = await rawRequest(`${gw.url}/api/session`, {
      host: "gateway.example/admin",
      headers: auth,
    });
    assertBadHost(answer);
  }, {
    config: ([url]) => ({ ...chatRoute([url!]), keys: [{ id: "app", key_env: "APP_KEY" }] }),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN, APP_KEY: "k" },
  });
});
