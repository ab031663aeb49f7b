import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import type { ConfigInput } from "../gateway/config/schema.ts";
import type { ClientFormat } from "../gateway/formats/format.ts";
import {
  clientHeaders,
  forwardedHeaderNames,
  NEVER_FORWARDED,
} from "../gateway/formats/client_headers.ts";
import { postJson, startTestGateway } from "./harness.ts";
import { chatStream } from "./fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { type Call, startFakeUpstream } from "./fake_upstreams/server.ts";

const GATEWAY_KEY = "pg-client-key";
const UPSTREAM_KEY = "sk-upstream-secret";
const env = { PG_KEY: GATEWAY_KEY, UP_KEY: UPSTREAM_KEY };
const answer = { text: ["ok"], usage: { input: 3, output: 1 } };

/** What Claude Code sends besides its body (its session header, its app tag, its betas). */
const CLAUDE_CODE_HEADERS = {
  "x-claude-code-session-id": "cc-session-1",
  "x-app": "cli",
};
const BETAS = ["context-management-2025-06-27", "context-1m-2025-08-07"];

/** A Messages body whose extra fields only the betas above make valid. */
const betaBody = {
  model: "smart",
  max_tokens: 64,
  stream: true,
  messages: [{ role: "user", content: "hi" }],
  context_management: { edits: [{ type: "clear_tool_uses_20250919" }] },
  output_config: { effort: "high" },
  thinking: { type: "adaptive" },
};

function route(kind: "anthropic" | "openai-chat", url: string): ConfigInput {
  return {
    upstreams: [{ id: "up", kind, base_url: url, api_key_env: "UP_KEY" }],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "real-model" }] }],
    keys: [{ id: "app", key_env: "PG_KEY" }],
  };
}

function anthropicStream(): { headers: Record<string, string>; body: { send: string }[] } {
  return {
    headers: { "content-type": "text/event-stream" },
    body: anthropicFake.streamChunks(answer).map((c) => ({ send: String(c) })),
  };
}

/** Headers no upstream may ever see from a client. */
function assertNothingPrivate(call: Call): void {
  for (
    const name of ["cookie", "x-session-id", "x-request-id", "x-pulsegate-note", "x-forward-me"]
  ) {
    assert.equal(call.headers.get(name), null, `${name} was forwarded`);
  }
  for (const [name, value] of call.headers) {
    assert.doesNotMatch(name, /^x-stainless-/);
    assert.ok(!value.includes(GATEWAY_KEY), `the caller's key went upstream in ${name}`);
  }
}

Deno.test("same format: Claude Code's betas, headers and ?beta=true reach the Anthropic upstream", async () => {
  const up = startFakeUpstream({ fallback: anthropicStream });
  const gw = await startTestGateway(route("anthropic", up.url), { env });
  try {
    const client = new Anthropic({ baseURL: gw.url, apiKey: GATEWAY_KEY, maxRetries: 0 });
    const { data: stream, response } = await client.beta.messages.create({
      ...betaBody,
      stream: true,
      betas: BETAS,
    } as Anthropic.Beta.MessageCreateParamsStreaming, {
      headers: {
        ...CLAUDE_CODE_HEADERS,
        "anthropic-version": "2023-06-01",
        cookie: "session=secret",
        "x-session-id": "ours",
        "x-request-id": "hdr-1",
        "x-pulsegate-note": "ours too",
        "x-forward-me": "not on any list",
      },
      query: { beta: "true" },
    }).withResponse();
    let text = "";
    for await (const event of stream) {
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
        text += event.delta.text;
      }
    }
    assert.equal(text, "ok");
    assert.equal(response.headers.get("x-request-id"), "hdr-1");

    const call = up.calls[0]!;
    assert.equal(call.path, "/v1/messages?beta=true");
    assert.equal(call.headers.get("anthropic-beta"), BETAS.join(","));
    assert.equal(call.headers.get("anthropic-version"), "2023-06-01");
    assert.equal(call.headers.get("x-claude-code-session-id"), "cc-session-1");
    assert.equal(call.headers.get("x-app"), "cli");
    assert.equal(call.headers.get("x-api-key"), UPSTREAM_KEY, "our key, never the caller's");
    assertNothingPrivate(call);
    const sent = call.json as Record<string, unknown>;
    assert.deepEqual(sent.context_management, betaBody.context_management);
    assert.equal(sent.model, "real-model");

    const { attempts } = await gw.row("hdr-1");
    assert.equal(attempts[0]?.droppedHeaders, null);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("same format: a client's own anthropic-version wins over the gateway's default", async () => {
  const up = startFakeUpstream({ fallback: anthropicStream });
  const gw = await startTestGateway(route("anthropic", up.url), { env });
  try {
    const headers = { "x-api-key": GATEWAY_KEY, "anthropic-version": "2099-01-01" };
    const res = await postJson(`${gw.url}/v1/messages`, betaBody, headers);
    await res.text();
    assert.equal(up.calls[0]?.headers.get("anthropic-version"), "2099-01-01");
    const bare = await postJson(`${gw.url}/v1/messages`, betaBody, { "x-api-key": GATEWAY_KEY });
    await bare.text();
    assert.equal(up.calls[1]?.headers.get("anthropic-version"), "2023-06-01");
    assert.equal(up.calls[1]?.headers.get("anthropic-beta"), null);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("translation: the headers and the body fields they enable are dropped together, and recorded", async () => {
  const up = startFakeUpstream({ fallback: () => chatStream(answer) });
  const gw = await startTestGateway(route("openai-chat", up.url), { env });
  try {
    const res = await postJson(`${gw.url}/v1/messages?beta=true`, betaBody, {
      "x-api-key": GATEWAY_KEY,
      "anthropic-beta": BETAS.join(","),
      ...CLAUDE_CODE_HEADERS,
      cookie: "session=secret",
      "x-request-id": "hdr-2",
    });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /"text":"ok"/);

    const call = up.calls[0]!;
    assert.equal(call.path, "/chat/completions");
    for (
      const name of ["anthropic-beta", "anthropic-version", "x-app", "x-claude-code-session-id"]
    ) {
      assert.equal(call.headers.get(name), null, `${name} went to a translated upstream`);
    }
    assert.equal(call.headers.get("authorization"), `Bearer ${UPSTREAM_KEY}`);
    assertNothingPrivate(call);
    const sent = call.json as Record<string, unknown>;
    for (const field of ["context_management", "output_config", "thinking", "reasoning_effort"]) {
      assert.equal(sent[field], undefined, `${field} was translated`);
    }

    const dropped = `anthropic-beta: ${
      BETAS.join(",")
    }; x-app; x-claude-code-session-id; ?beta=true`;
    const { attempts, request } = await gw.row("hdr-2");
    assert.equal(attempts[0]?.droppedHeaders, dropped);
    assert.equal(request.sessionId, "cc-session-1");
    const detail = await (await fetch(`${gw.url}/admin/api/requests/hdr-2`)).json();
    assert.equal(detail.attempts[0].droppedHeaders, dropped, "the admin history API shows it");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("translation without any client header records nothing dropped", async () => {
  const up = startFakeUpstream({ fallback: () => chatStream(answer) });
  const gw = await startTestGateway(route("openai-chat", up.url), { env });
  try {
    const res = await postJson(`${gw.url}/v1/messages`, betaBody, {
      "x-api-key": GATEWAY_KEY,
      "x-request-id": "hdr-3",
    });
    await res.text();
    const { attempts } = await gw.row("hdr-3");
    assert.equal(attempts[0]?.droppedHeaders, null);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("Codex's session and feature headers reach an OpenAI upstream of its format", async () => {
  const up = startFakeUpstream({ fallback: () => chatStream(answer) });
  const gw = await startTestGateway(route("openai-chat", up.url), { env });
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    }, {
      authorization: `Bearer ${GATEWAY_KEY}`,
      originator: "codex_cli_rs",
      version: "0.50.0",
      session_id: "codex-conv-1",
      "openai-beta": "responses=experimental",
      "openai-organization": "org-caller",
      "openai-project": "proj-caller",
    });
    await res.text();
    const call = up.calls[0]!;
    assert.equal(call.headers.get("originator"), "codex_cli_rs");
    assert.equal(call.headers.get("version"), "0.50.0");
    assert.equal(call.headers.get("session_id"), "codex-conv-1");
    assert.equal(call.headers.get("openai-beta"), "responses=experimental");
    assert.equal(call.headers.get("authorization"), `Bearer ${UPSTREAM_KEY}`);
    // The caller's account at OpenAI is not the one our key bills.
    assert.equal(call.headers.get("openai-organization"), null);
    assert.equal(call.headers.get("openai-project"), null);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("no allow-list names a header that must never be forwarded", () => {
  const formats: ClientFormat[] = ["anthropic", "openai-chat", "openai-responses", "gemini"];
  for (const format of formats) {
    for (const name of forwardedHeaderNames(format)) {
      assert.ok(!NEVER_FORWARDED.includes(name), `${format} forwards ${name}`);
      assert.doesNotMatch(name, /^x-pulsegate-/);
      assert.equal(name, name.toLowerCase());
    }
    // Every never-forwarded header sent, plus the format's query: only allowed ones come out.
    const request = new Request("http://gw/v1/x?key=secret&alt=sse&beta=true", {
      headers: NEVER_FORWARDED.map((n): [string, string] => [n, "v"]),
    });
    const parts = clientHeaders(format, request);
    assert.deepEqual(parts.headers, []);
    assert.deepEqual(parts.query, format === "anthropic" ? [["beta", "true"]] : []);
  }
});
