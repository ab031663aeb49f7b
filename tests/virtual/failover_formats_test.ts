/**
 * How each client format is told that no candidate answered, and which upstream pings never
 * restart the idle timer: at the real defaults (idle timeout 300 s, opening hold 15 s), in
 * virtual time.
 */
import assert from "node:assert/strict";
import { startVirtualGateway } from "../virtual_gateway.ts";
import { headersNever } from "../fake_upstreams/openai_chat_script.ts";
import type { Script } from "../fake_upstreams/server.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import { responsesStreamChunks } from "../fake_upstreams/openai_responses_script.ts";

const IDLE_MS = 300_000;

const config = (kind: "openai-chat" | "anthropic" | "openai-responses" = "openai-chat") =>
(
  [url]: string[],
) => ({
  upstreams: [{ id: "u", kind, base_url: url! }],
  routes: [{ model: "smart", candidates: [{ upstream: "u", model: "m" }] }],
});

/** The fields the three error shapes use. */
interface ErrorBody {
  type?: string;
  error: { type?: string; code?: string | number; status?: string };
}

const messages = [{ role: "user", content: "hi" }];

/** Each client format's request for a whole answer, and how its 504 must look. */
const FORMATS: Array<[string, string, unknown, (body: ErrorBody) => void]> = [
  ["openai-chat", "/v1/chat/completions", { model: "smart", messages }, (b) => {
    assert.equal(b.error.type, "timeout_error");
    assert.equal(b.error.code, "gw.upstream.idle_timeout");
  }],
  ["anthropic", "/v1/messages", { model: "smart", max_tokens: 10, messages }, (b) => {
    assert.equal(b.type, "error");
    assert.equal(b.error.type, "timeout_error");
  }],
  ["gemini", "/v1beta/models/smart:generateContent", {
    contents: [{ role: "user", parts: [{ text: "hi" }] }],
  }, (b) => {
    assert.equal(b.error.code, 504);
    assert.equal(b.error.status, "DEADLINE_EXCEEDED");
  }],
];

for (const [format, path, body, check] of FORMATS) {
  Deno.test(`${format}: no candidate left before headers is a 504 in the client's format, at 300 s`, async () => {
    await using v = await startVirtualGateway({ config: config() });
    v.ups[0]!.setHandler(() => headersNever);
    const got = await v.send(path, body);
    assert.equal(got.status, 504);
    assert.equal(got.headersAt, IDLE_MS);
    assert.equal(got.headers.get("x-pulsegate-error"), "upstream");
    check(JSON.parse(got.text));
  });
}

const sse = (chunks: (string | Uint8Array)[]): Script => ({
  headers: { "content-type": "text/event-stream" },
  body: [...chunks.map((send) => ({ send })), { hang: true }],
});

/** Pings alone never restart the idle timer. */
const PINGS: Array<[string, "anthropic" | "openai-responses", Script]> = [
  [
    "anthropic",
    "anthropic",
    sse(
      anthropicFake.streamChunks({ text: [], usage: { input: 1, output: 0 }, pingFirst: 3 }).slice(
        0,
        4,
      ),
    ),
  ],
  [
    "openai-responses",
    "openai-responses",
    sse(
      responsesStreamChunks({ text: [], usage: { input: 1, output: 0 } }, { pingFirst: 3 }).slice(
        0,
        4,
      ),
    ),
  ],
];

for (const [name, kind, script] of PINGS) {
  Deno.test(`${name} pings alone still time out at 300 s`, async () => {
    await using v = await startVirtualGateway({ config: config(kind) });
    v.ups[0]!.setHandler(() => script);
    const got = await v.send("/v1/chat/completions", { model: "smart", stream: true, messages });
    assert.match(got.text, /gw\.upstream\.idle_timeout"/);
    assert.equal(got.endedAt, IDLE_MS);
    const { attempts } = await v.row(got.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.outcome, "idle_timeout");
  });
}

Deno.test("gemini SSE clients get the early headers at 15 s without comments", async () => {
  await using v = await startVirtualGateway({ config: config() });
  v.ups[0]!.setHandler(() => headersNever);
  const got = await v.send("/v1beta/models/smart:streamGenerateContent?alt=sse", {
    contents: [{ role: "user", parts: [{ text: "hi" }] }],
  });
  assert.equal(got.status, 200, "early headers after the opening hold");
  assert.equal(got.headersAt, 15_000);
  assert.doesNotMatch(got.text, /^:/m, "no comment lines for Google's SDK");
  assert.match(got.text, /DEADLINE_EXCEEDED|idle_timeout/);
  assert.ok(got.pieces.every((p) => p.at === IDLE_MS), "nothing before the timeout's error");
});
