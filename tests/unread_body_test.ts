import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { eventually, postJson, type TestGateway, withGateway } from "./harness.ts";
import { RawBodyClient } from "./raw_body.ts";

/**
 * docs/deploy.md "Answers before the body": an answer given before the request's body was read to
 * its end says `connection: close`, and the gateway closes the connection after it, so the
 * client's socket reads the end and the gateway's count of open connections comes back down.
 * Before, Deno kept reading for the rest of the body, and a client that never sent it held the
 * connection (40 of 40 still open 60 s after their 408). An answer that read its whole body keeps
 * the connection for the next request.
 */

const ENV = { PULSEGATE_KEY_OPEN: "sk-open", PULSEGATE_KEY_LIMITED: "sk-limited" };
const ASK = { model: "smart", messages: [{ role: "user", content: "hi" }] };
const JSON_TYPE = { "content-type": "application/json" };
const OPEN_KEY = { authorization: "Bearer sk-open", ...JSON_TYPE };
/** Real time, however slow the machine: the gateway closes after about 2 s. */
const WITHIN_MS = 10_000;

function config(url: string): ConfigInput {
  return {
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
    keys: [
      { id: "open", key_env: "PULSEGATE_KEY_OPEN" },
      { id: "limited", key_env: "PULSEGATE_KEY_LIMITED", rpm: 1 },
    ],
  };
}

/** Each answer given before the body, and how a request gets it. */
const EARLY: Array<{
  status: number;
  code: string | null;
  path: string;
  headers: Record<string, string>;
  method?: string;
}> = [
  // Past 64 KiB: read chunk by chunk, the reader cancelled at the deadline (10 s: 100 ms here).
  {
    status: 408,
    code: "gw.client.body_timeout",
    path: "/v1/chat/completions",
    headers: { ...OPEN_KEY, "content-length": "100000" },
  },
  // Up to 64 KiB: read in one call, left behind at the deadline.
  {
    status: 408,
    code: "gw.client.body_timeout",
    path: "/v1/messages",
    headers: { ...OPEN_KEY, "anthropic-version": "2023-06-01", "content-length": "5000" },
  },
  {
    status: 401,
    code: "gw.client.unauthorized",
    path: "/v1/chat/completions",
    headers: { ...JSON_TYPE, "content-length": "5000" },
  },
  {
    status: 403,
    code: "gw.client.cross_site",
    path: "/sessions/s-1/abort",
    headers: { origin: "http://evil.example", "content-length": "5000" },
  },
  {
    status: 413,
    code: "gw.client.body_too_large",
    path: "/v1/chat/completions",
    headers: { ...OPEN_KEY, "content-length": String(40 * 1024 * 1024) },
  },
  {
    status: 415,
    code: "gw.client.unsupported_media_type",
    path: "/v1/chat/completions",
    headers: {
      authorization: "Bearer sk-open",
      "content-type": "text/plain",
      "content-length": "5000",
    },
  },
  {
    status: 429,
    code: "gw.key.rate_limited",
    path: "/v1/chat/completions",
    headers: { authorization: "Bearer sk-limited", ...JSON_TYPE, "content-length": "5000" },
  },
  {
    status: 404,
    code: "gw.client.not_found",
    path: "/v1/no-such-endpoint",
    headers: { ...OPEN_KEY, "content-length": "5000" },
  },
  // Any method: Deno reads a GET's declared body too, and hides it from the handler.
  {
    status: 200,
    code: null,
    path: "/healthz",
    method: "GET",
    headers: { "content-length": "5000" },
  },
];

/** `pulsegate_client_connections` as /metrics shows it. */
async function openConnections(gw: TestGateway): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const value = /^pulsegate_client_connections (\d+)$/m.exec(text)?.[1];
  assert.ok(value !== undefined, "the gauge is in /metrics");
  return Number(value);
}

function connectionTokens(headers: Headers): string[] {
  return (headers.get("connection") ?? "").split(",").map((token) => token.trim().toLowerCase());
}

Deno.test("an answer before the body says connection: close and the gateway closes the connection: 408, 401, 403, 413, 415, 429, 404, a GET's 200", async () => {
  await withGateway(async (gw, [up]) => {
    up!.setHandler(() => chatWhole({ text: ["ok"] }));
    const spent = await postJson(`${gw.url}/v1/chat/completions`, ASK, {
      authorization: "Bearer sk-limited",
    });
    assert.equal(spent.status, 200, "the limited key's one request this minute");
    await spent.body?.cancel();
    const before = await openConnections(gw);

    const clients = await Promise.all(
      EARLY.map((c) => RawBodyClient.open(gw.url, c)),
    );
    try {
      // Side by side, each row what its client saw: all of them fail together, or none.
      const seen = await Promise.all(clients.map(async (client) => {
        // A part of the declared body, and never the rest.
        await client.write('{"model": "smart", ');
        const answer = await client.answer({ ms: WITHIN_MS });
        return {
          status: answer.status,
          code: answer.headers.get("x-pulsegate-error-code"),
          close: connectionTokens(answer.headers).includes("close"),
          end: await client.ended({ ms: WITHIN_MS }).catch(() => `open after ${WITHIN_MS} ms`),
        };
      }));
      assert.deepEqual(
        seen,
        EARLY.map((c) => ({ status: c.status, code: c.code, close: true, end: "eof" })),
      );
      // Counted down by the gateway's own close: every client still holds its socket.
      await eventually(async () => (await openConnections(gw)) === before, {
        what: `the gateway's open connections back to ${before}`,
        ms: WITHIN_MS,
      });
    } finally {
      for (const client of clients) client.close();
    }
    assert.equal(up!.calls.length, 1, "no early answer reached the upstream");
    await eventually(() => gw.metrics.inflight === 0);
  }, { config: ([url]) => config(url!), env: ENV });
});

Deno.test("an answer that read its whole body keeps the connection for the next request", async () => {
  await withGateway(async (gw, [up]) => {
    up!.setHandler(() => chatWhole({ text: ["ok"] }));
    const before = await openConnections(gw);
    const body = JSON.stringify(ASK);
    const client = await RawBodyClient.open(gw.url, {
      path: "/v1/chat/completions",
      headers: { ...OPEN_KEY, "content-length": String(body.length) },
    });
    try {
      await client.write(body);
      const whole = await client.answer({ ms: WITHIN_MS, take: true });
      assert.equal(whole.status, 200, whole.text);
      assert.ok(!connectionTokens(whole.headers).includes("close"), "a 200 keeps the connection");
      // Bad JSON, sent whole: answered 400 after reading it, and the connection kept too.
      const bad = "{not json";
      await client.write(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer sk-open\r\n" +
          `content-type: application/json\r\ncontent-length: ${bad.length}\r\n\r\n${bad}`,
      );
      const refused = await client.answer({ ms: WITHIN_MS, take: true });
      assert.equal(refused.status, 400, refused.text);
      assert.ok(!connectionTokens(refused.headers).includes("close"), "a 400 keeps it too");
      await client.write("GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n");
      const health = await client.answer({ ms: WITHIN_MS, take: true });
      assert.equal(health.status, 200, "the third request is served on the same connection");
      assert.equal(await openConnections(gw), before + 1, "counted while open");
    } finally {
      client.close();
    }
    await eventually(async () => (await openConnections(gw)) === before, {
      what: "the connection the client closed no longer counted",
      ms: WITHIN_MS,
    });
  }, { config: ([url]) => config(url!), env: ENV });
});
