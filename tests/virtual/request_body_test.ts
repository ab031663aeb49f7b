import assert from "node:assert/strict";
import { chatWhole } from "../fake_upstreams/openai_chat_script.ts";
import { bodyOnClock, type BodyPiece, startVirtualGateway } from "../virtual_gateway.ts";

/**
 * docs/security.md "Request bodies and per-key concurrency": a body's deadline (10 s plus 1 s
 * per 16 KiB received) cuts a slow body with a 408 in the client's own format, and never a
 * steady one that takes longer than the grace. The body is a stream fed in virtual time, so
 * each cut is asserted at its exact instant.
 */

const ASK = { model: "smart", messages: [{ role: "user", content: "hi" }] };
const KIB16 = 16 * 1024;
const spaces = (n: number) => new TextEncoder().encode(" ".repeat(n));

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

Deno.test("a body that stalls after 16 KiB gets 408 gw.client.body_timeout at 11 s exactly, in each client's format, recorded", async () => {
  await using v = await startVirtualGateway();
  for (const [i, format] of FORMATS.entries()) {
    const id = `slow-${i}`;
    // 100 KB declared: read chunk by chunk; 16 KiB arrive at once, then nothing.
    const got = await v.send(format.path, undefined, {
      headers: { "content-length": "100000", "x-request-id": id, ...format.headers },
      bodyStream: bodyOnClock(v.clock, [{ at: 0, bytes: spaces(KIB16) }]),
    });
    assert.equal(got.status, 408, got.text);
    assert.equal(got.headersAt, 11_000, "10 s of grace plus 1 s for the 16 KiB received");
    assert.equal(got.headers.get("x-pulsegate-error-code"), "gw.client.body_timeout");
    assert.equal(got.headers.get("x-pulsegate-error"), "client");
    assert.equal(format.timeout(JSON.parse(got.text)), format.word, got.text);
    const { request } = await v.row(id);
    assert.equal(request.status, 408);
    assert.equal(request.errorCode, "gw.client.body_timeout");
    assert.match(request.errorMessage ?? "", /request body too slow: 16384 bytes in 11\.0 s/);
  }
  assert.equal(v.ups[0]!.calls.length, 0);
  assert.equal(v.gw.metrics.inflight, 0);
});

Deno.test("the grace alone: a body with nothing in it is cut at 10 s; one whose end comes at 9.999 s is read", async () => {
  await using v = await startVirtualGateway();
  v.ups[0]!.setHandler(() => chatWhole({ text: ["ok"] }));
  const bytes = new TextEncoder().encode(JSON.stringify(ASK));
  const headers = { "content-length": String(100_000) };
  const stalled = await v.send("/v1/chat/completions", undefined, {
    headers,
    bodyStream: bodyOnClock(v.clock, []),
  });
  assert.equal(stalled.status, 408);
  assert.equal(stalled.headersAt, 10_000);
  // A chunked body (no length), all of it at 9.999 s.
  const late = await v.send("/v1/chat/completions", undefined, {
    bodyStream: bodyOnClock(v.clock, [{ at: 9_999, bytes }], { endAt: 9_999 }),
  });
  assert.equal(late.status, 200, late.text);
  assert.equal(late.headersAt, 9_999);
});

Deno.test("a steady body that takes longer than the grace is read whole and answered", async () => {
  await using v = await startVirtualGateway();
  v.ups[0]!.setHandler(() => chatWhole({ text: ["ok"] }));
  // 1.5 MiB in 48 KiB pieces every 2 s: 62 s, six times the grace, at 1.5 times the 16 KiB/s
  // the deadline asks for.
  const body = JSON.stringify({ ...ASK, padding: "x".repeat(1.5 * 1024 * 1024) });
  const bytes = new TextEncoder().encode(body);
  const pieces: BodyPiece[] = [];
  for (let at = 0; at < bytes.byteLength; at += 48 * 1024) {
    pieces.push({ at: (at / (48 * 1024)) * 2_000, bytes: bytes.subarray(at, at + 48 * 1024) });
  }
  const last = pieces.at(-1)!.at;
  const got = await v.send("/v1/chat/completions", undefined, {
    headers: { "content-length": String(bytes.byteLength), "x-request-id": "steady" },
    bodyStream: bodyOnClock(v.clock, pieces, { endAt: last }),
  });
  assert.equal(got.status, 200, got.text);
  assert.equal(got.headersAt, last, "answered when its last piece came");
  assert.ok(last > 60_000, "the body took six times its grace");
  assert.equal(JSON.stringify(v.ups[0]!.calls[0]!.json).length > 1.5 * 1024 * 1024, true);
  const { request } = await v.row("steady");
  assert.equal(request.status, 200);
});

Deno.test("a body that falls behind its pace is cut when its deadline passes, not before", async () => {
  await using v = await startVirtualGateway();
  // 32 KiB by 5 s (due at 12 s), then nothing: cut at 12 s, though it was ahead at 11.999 s.
  const got = await v.send("/v1/chat/completions", undefined, {
    headers: { "content-length": "200000" },
    bodyStream: bodyOnClock(v.clock, [
      { at: 0, bytes: spaces(KIB16) },
      { at: 5_000, bytes: spaces(KIB16) },
    ]),
  });
  assert.equal(got.status, 408);
  assert.equal(got.headersAt, 12_000);
});
