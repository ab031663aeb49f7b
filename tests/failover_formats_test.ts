import assert from "node:assert/strict";
import { postJson, startTestGateway } from "./harness.ts";
import { headersNever } from "./fake_upstreams/openai_chat_script.ts";
import { type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { responsesStreamChunks } from "./fake_upstreams/openai_responses_script.ts";

const config = (
  url: string,
  opts: { kind?: "openai-chat" | "anthropic" | "openai-responses"; idleSecs?: number } = {},
) => ({
  failover: { idle_timeout_secs: opts.idleSecs ?? 30 },
  upstreams: [{ id: "u", kind: opts.kind ?? "openai-chat", base_url: url }],
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
  Deno.test(`${format}: no candidate left before headers is a 504 in the client's format`, async () => {
    const up = startFakeUpstream({ fallback: () => headersNever });
    const gw = await startTestGateway(config(up.url));
    try {
      const res = await postJson(`${gw.url}${path}`, body);
      assert.equal(res.status, 504);
      assert.equal(res.headers.get("x-pulsegate-error"), "upstream");
      check(await res.json());
    } finally {
      await gw.stop();
      await up.close();
    }
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
  Deno.test(`${name} pings alone still time out`, async () => {
    const up = startFakeUpstream({ fallback: () => script });
    const gw = await startTestGateway(config(up.url, { kind }));
    try {
      const res = await postJson(`${gw.url}/v1/chat/completions`, {
        model: "smart",
        stream: true,
        messages,
      });
      const text = await res.text();
      assert.match(text, /gw\.upstream\.idle_timeout"/);
      const { attempts } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(attempts[0]!.outcome, "idle_timeout");
    } finally {
      await gw.stop();
      await up.close();
    }
  });
}

Deno.test("gemini SSE clients get the early headers without comments", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  // A 600 ms window: the 150 ms hold passes with a 4x margin before the timeout.
  const gw = await startTestGateway(config(up.url, { idleSecs: 60 }));
  try {
    const res = await postJson(`${gw.url}/v1beta/models/smart:streamGenerateContent?alt=sse`, {
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
    });
    assert.equal(res.status, 200, "early headers after the opening hold");
    const text = await res.text();
    assert.doesNotMatch(text, /^:/m, "no comment lines for Google's SDK");
    assert.match(text, /DEADLINE_EXCEEDED|idle_timeout/);
  } finally {
    await gw.stop();
    await up.close();
  }
});
