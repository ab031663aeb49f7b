import assert from "node:assert/strict";
import { chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import { chatRoute, eventually, withGateway } from "./harness.ts";
import { RawBodyClient } from "./raw_body.ts";

/**
 * docs/security.md "Request bodies and per-key concurrency": a body's deadline (10 s plus 1 s
 * per 16 KiB received) cuts a slow body with a 408 in the client's own format, and never a
 * steady one that takes longer than the grace.
 */

const ASK = { model: "smart", messages: [{ role: "user", content: "hi" }] };

/** How each client format asks, and what its 408 looks like. */
const FORMATS: Array<{
  path: string;
  headers: Record<string, string>;
  timeout: (body: Record<string, Record<string, unknown>>) => unknown;
  word: string;
}> = [
  {
    path: "/v1/chat/completions",
    headers: {},
    timeout: (body: Record<string, Record<string, unknown>>) => body.error!.type,
    word: "timeout_error",
  },
  {
    path: "/v1/messages",
    headers: { "anthropic-version": "2023-06-01" },
    timeout: (body: Record<string, Record<string, unknown>>) => body.error!.type,
    word: "timeout_error",
  },
  {
    path: "/v1beta/models/smart:generateContent",
    headers: {},
    timeout: (body: Record<string, Record<string, unknown>>) => body.error!.status,
    word: "DEADLINE_EXCEEDED",
  },
];

Deno.test("a body that trickles gets 408 gw.client.body_timeout in each client's format, recorded", async () => {
  await withGateway(async (gw, [up]) => {
    for (const [i, format] of FORMATS.entries()) {
      const id = `slow-${i}`;
      // 100 KB: read chunk by chunk; its 10 s grace lasts 100 ms at the test scale.
      const client = await RawBodyClient.open(gw.url, {
        path: format.path,
        headers: {
          "content-type": "application/json",
          "content-length": "100000",
          "x-request-id": id,
          ...format.headers,
        },
      });
      try {
        client.trickle(" ", { everyMs: 10 });
        const answer = await client.answer();
        assert.equal(answer.status, 408, answer.text);
        assert.equal(answer.headers.get("x-pulsegate-error-code"), "gw.client.body_timeout");
        assert.equal(answer.headers.get("x-pulsegate-error"), "client");
        assert.equal(format.timeout(JSON.parse(answer.text)), format.word, answer.text);
        const { request } = await gw.row(id);
        assert.equal(request.status, 408);
        assert.equal(request.errorCode, "gw.client.body_timeout");
        assert.match(request.errorMessage ?? "", /request body too slow: \d+ bytes in/);
      } finally {
        client.close();
      }
    }
    assert.equal(up!.calls.length, 0);
    await eventually(() => gw.metrics.inflight === 0);
  });
});

Deno.test("a steady body that takes longer than the grace is read whole and answered", async () => {
  await withGateway(async (gw, [up]) => {
    up!.setHandler(() => chatWhole({ text: ["ok"] }));
    // 1.5 MiB in 48 KiB pieces every 50 ms: about 1.6 s, past the 1 s grace (scale 0.1), at
    // about 6 times the 160 KiB/s the deadline asks for at this scale.
    const body = JSON.stringify({ ...ASK, padding: "x".repeat(1.5 * 1024 * 1024) });
    const bytes = new TextEncoder().encode(body);
    const client = await RawBodyClient.open(gw.url, {
      path: "/v1/chat/completions",
      headers: {
        "content-type": "application/json",
        "content-length": String(bytes.byteLength),
        "x-request-id": "steady",
      },
    });
    const started = Date.now();
    try {
      for (let at = 0; at < bytes.byteLength; at += 48 * 1024) {
        await client.write(bytes.subarray(at, at + 48 * 1024));
        await new Promise((r) => setTimeout(r, 50));
      }
      const answer = await client.answer();
      assert.equal(answer.status, 200, answer.text);
      assert.ok(Date.now() - started > 1_000, "the body took longer than its grace");
      assert.equal(JSON.stringify(up!.calls[0]!.json).length > 1.5 * 1024 * 1024, true);
      const { request } = await gw.row("steady");
      assert.equal(request.status, 200);
    } finally {
      client.close();
    }
  }, { config: (urls) => chatRoute(urls), scale: 0.1 });
});
