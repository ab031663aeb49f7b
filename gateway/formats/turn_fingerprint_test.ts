import assert from "node:assert/strict";
import { CLIENT_CODECS } from "./formats.ts";
import { turnFingerprint } from "./turn_fingerprint.ts";

/**
 * The turn fence's fingerprint (docs/design.md "Abort and disconnect"), read through the client
 * codecs as the proxy reads a body: each variant either is the same turn re-sent (must match the
 * base) or another turn (must not).
 */

type Body = Record<string, unknown>;

const chat = (body: Body) => turnFingerprint(CLIENT_CODECS.chat.parseRequest(body, {}));
const anthropic = (body: Body) => turnFingerprint(CLIENT_CODECS.anthropic.parseRequest(body, {}));
const gemini = (body: Body) =>
  turnFingerprint(CLIENT_CODECS.gemini.parseRequest(body, { pathModel: "smart" }));

const CHAT: Body = {
  model: "smart",
  stream: true,
  messages: [
    { role: "system", content: "be brief" },
    { role: "user", content: "list the files" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{
        id: "call_1",
        type: "function",
        function: { name: "ls", arguments: '{"path":".","all":true}' },
      }],
    },
    { role: "tool", tool_call_id: "call_1", content: "a.ts b.ts" },
    { role: "user", content: [{ type: "text", text: "and now?" }] },
  ],
};

const messages = CHAT.messages as Body[];

/** The same turn re-sent: streamed or not, other limits, sampling, ids and metadata. */
const SAME: Array<[string, Body]> = [
  ["not streamed", { ...CHAT, stream: false }],
  ["other max_tokens", { ...CHAT, max_tokens: 17 }],
  ["other max_completion_tokens", { ...CHAT, max_completion_tokens: 4096 }],
  ["temperature and top_p", { ...CHAT, temperature: 0.2, top_p: 0.5 }],
  ["another user id", { ...CHAT, user: "someone-else" }],
  ["metadata", { ...CHAT, metadata: { run: "2" }, store: false }],
  ["another model", { ...CHAT, model: "other-route" }],
  ["stream options", { ...CHAT, stream_options: { include_usage: true } }],
  ["tools offered", {
    ...CHAT,
    tools: [{ type: "function", function: { name: "ls", parameters: { type: "object" } } }],
  }],
  ["another tool call id", {
    ...CHAT,
    messages: messages.map((m) =>
      m.role === "assistant"
        ? {
          ...m,
          tool_calls: [{
            id: "call_9",
            type: "function",
            function: { name: "ls", arguments: '{ "all": true, "path": "." }' },
          }],
        }
        : m.role === "tool"
        ? { ...m, tool_call_id: "call_9" }
        : m
    ),
  }],
  ["text as a string", {
    ...CHAT,
    messages: [...messages.slice(0, 4), { role: "user", content: "and now?" }],
  }],
];

/** Another turn, or another conversation: never the aborted one. */
const OTHER: Array<[string, Body]> = [
  ["one more user turn", {
    ...CHAT,
    messages: [...messages, { role: "assistant", content: "a.ts" }, {
      role: "user",
      content: "thanks",
    }],
  }],
  ["a different text", {
    ...CHAT,
    messages: [...messages.slice(0, 4), { role: "user", content: "and then?" }],
  }],
  ["another system prompt", {
    ...CHAT,
    messages: [{ role: "system", content: "be long" }, ...messages.slice(1)],
  }],
  ["other tool arguments", {
    ...CHAT,
    messages: messages.map((m) =>
      m.role === "assistant"
        ? {
          ...m,
          tool_calls: [{
            id: "call_1",
            type: "function",
            function: { name: "ls", arguments: '{"path":"src","all":true}' },
          }],
        }
        : m
    ),
  }],
  ["another tool result", {
    ...CHAT,
    messages: messages.map((m) => m.role === "tool" ? { ...m, content: "c.ts" } : m),
  }],
  ["the last turn dropped", { ...CHAT, messages: messages.slice(0, 4) }],
  ["another image", {
    ...CHAT,
    messages: [...messages.slice(0, 4), {
      role: "user",
      content: [{ type: "text", text: "and now?" }, {
        type: "image_url",
        image_url: { url: "https://example.test/b.png" },
      }],
    }],
  }],
  ["texts split differently from the roles", {
    ...CHAT,
    messages: [...messages.slice(0, 4), { role: "assistant", content: "and now?" }],
  }],
];

const base = chat(CHAT);

for (const [name, body] of SAME) {
  Deno.test(`turn fingerprint: the same turn ${name} matches`, () => {
    assert.equal(chat(body), base);
  });
}

for (const [name, body] of OTHER) {
  Deno.test(`turn fingerprint: ${name} does not match`, () => {
    assert.notEqual(chat(body), base);
  });
}

Deno.test("turn fingerprint: two images differ by their bytes, one image matches itself", () => {
  const withImage = (data: string) =>
    anthropic({
      model: "smart",
      max_tokens: 10,
      messages: [{
        role: "user",
        content: [{ type: "image", source: { type: "base64", media_type: "image/png", data } }],
      }],
    });
  assert.equal(withImage("aGVsbG8="), withImage("aGVsbG8="));
  assert.notEqual(withImage("aGVsbG8="), withImage("aGVsbG9="));
});

Deno.test("turn fingerprint: the same turn in another client format matches", () => {
  const turn = [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }, {
    role: "user",
    content: "how are you",
  }];
  const fromChat = chat({
    model: "smart",
    messages: [{ role: "system", content: "sys" }, ...turn],
  });
  const fromAnthropic = anthropic({
    model: "smart",
    max_tokens: 100,
    stream: true,
    system: [{ type: "text", text: "sys", cache_control: { type: "ephemeral" } }],
    metadata: { user_id: "u-1" },
    messages: turn.map((m) => ({
      role: m.role,
      content: [{ type: "text", text: m.content, cache_control: { type: "ephemeral" } }],
    })),
  });
  const fromGemini = gemini({
    systemInstruction: { parts: [{ text: "sys" }] },
    generationConfig: { maxOutputTokens: 5, temperature: 1 },
    contents: turn.map((m) => ({
      role: m.role === "assistant" ? "model" : "user",
      parts: [{ text: m.content }],
    })),
  });
  assert.equal(fromAnthropic, fromChat, "cache marks, metadata and limits are not the turn");
  assert.equal(fromGemini, fromChat);
});

/**
 * Claude Code's turn as it sends it, where it takes its base URL for Anthropic's own: the
 * system prompt opens with a billing line whose `cch=` digests the body, so its non-streamed
 * re-send of the turn carries another one (both values as Claude Code 2.1.332 sent them).
 */
const billing = (cch: string) =>
  `x-anthropic-billing-header: cc_version=2.1.332.8ef; cc_entrypoint=sdk-cli; cch=${cch}; ` +
  "cc_prompt_id=dc1b4b26-81b0-4769-bcb9-2eeca6c89fec; cc_turn_origin=sdk; cc_prompt_index=0; " +
  "cc_turn_index=1;";

const CLAUDE_CODE: Body = {
  model: "smart",
  max_tokens: 32000,
  stream: true,
  system: [
    { type: "text", text: billing("1374d") },
    { type: "text", text: "You are a Claude agent.", cache_control: { type: "ephemeral" } },
  ],
  metadata: { user_id: '{"device_id":"d","account_uuid":"","session_id":"s-1"}' },
  messages: [{ role: "user", content: [{ type: "text", text: "Reply with the text." }] }],
};

const claudeSystem = (first: string, rest = "You are a Claude agent.") => ({
  ...CLAUDE_CODE,
  system: [{ type: "text", text: first }, { type: "text", text: rest }],
});

const CLAUDE_CODE_SAME: Array<[string, Body]> = [
  ["re-sent by Claude Code (not streamed, another cch=)", {
    ...claudeSystem(billing("ff074")),
    stream: false,
  }],
  ["without the billing line (a base URL not taken for Anthropic's)", {
    ...CLAUDE_CODE,
    system: [{ type: "text", text: "You are a Claude agent." }],
  }],
  ["the billing line and the prompt in one string", {
    ...CLAUDE_CODE,
    system: `${billing("0a0a0")}\nYou are a Claude agent.`,
  }],
];

const CLAUDE_CODE_OTHER: Array<[string, Body]> = [
  ["another system prompt after the billing line", claudeSystem(billing("1374d"), "Be terse.")],
  ["the billing header's name inside a line of the prompt", {
    ...claudeSystem(`Keep this: ${billing("1374d")}`),
  }],
  ["another user turn", {
    ...CLAUDE_CODE,
    messages: [{ role: "user", content: "Reply with another text." }],
  }],
];

const claudeBase = anthropic(CLAUDE_CODE);

for (const [name, body] of CLAUDE_CODE_SAME) {
  Deno.test(`turn fingerprint: Claude Code's turn ${name} matches`, () => {
    assert.equal(anthropic(body), claudeBase);
  });
}

for (const [name, body] of CLAUDE_CODE_OTHER) {
  Deno.test(`turn fingerprint: Claude Code's turn with ${name} does not match`, () => {
    assert.notEqual(anthropic(body), claudeBase);
  });
}
