import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { anthropicAnswering, encodeEvents, streamResponse } from "./format_kit.ts";
import { anthropicClient, anthropicUpstream } from "../gateway/formats/anthropic/mod.ts";
import { anthropicEventIsContent } from "../gateway/formats/anthropic/pulse.ts";
import {
  anthropicRequestBody,
  parseAnthropicRequest,
} from "../gateway/formats/anthropic/request.ts";
import type { Config, Upstream } from "../gateway/config/schema.ts";
import type { ClientStreamEncoder, UpstreamFrame } from "../gateway/formats/format.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import type { IrEvent, IrRequest, IrResponse } from "../gateway/formats/ir.ts";
import { parseChatRequest } from "../gateway/formats/openai_chat/request.ts";
import {
  abortedByOperator,
  clientDisconnected,
  idleTimeout,
} from "../gateway/forward/stop_reasons.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import {
  type AnthropicScript,
  errorBody,
  errorEvent,
  keepAliveCount,
  streamChunks,
  wholeBody,
} from "./fake_upstreams/anthropic_script.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---------------------------------------------------------------- pulse (docs/design.md "Pulse")

const pulseCases: { name: string; event: string; data: unknown; content: boolean }[] = [
  {
    name: "message_start is a keep-alive",
    event: "message_start",
    data: { type: "message_start", message: { id: "msg_1", content: [], usage: {} } },
    content: false,
  },
  { name: "ping is a keep-alive", event: "ping", data: { type: "ping" }, content: false },
  { name: "ping without data is a keep-alive", event: "ping", data: undefined, content: false },
  {
    name: "text block start",
    event: "content_block_start",
    data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    content: true,
  },
  {
    name: "thinking block start",
    event: "content_block_start",
    data: {
      type: "content_block_start",
      index: 0,
      content_block: { type: "thinking", thinking: "", signature: "" },
    },
    content: true,
  },
  {
    name: "tool_use block start",
    event: "content_block_start",
    data: {
      type: "content_block_start",
      index: 1,
      content_block: { type: "tool_use", id: "toolu_1", name: "f", input: {} },
    },
    content: true,
  },
  ...["text_delta", "thinking_delta", "input_json_delta", "signature_delta"].map((delta) => ({
    name: `content_block_delta ${delta}`,
    event: "content_block_delta",
    data: { type: "content_block_delta", index: 0, delta: { type: delta } },
    content: true,
  })),
  {
    name: "content_block_stop",
    event: "content_block_stop",
    data: { type: "content_block_stop", index: 0 },
    content: true,
  },
  {
    name: "message_delta with stop_reason and usage",
    event: "message_delta",
    data: {
      type: "message_delta",
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 5 },
    },
    content: true,
  },
  { name: "message_stop", event: "message_stop", data: { type: "message_stop" }, content: true },
  {
    name: "error",
    event: "error",
    data: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
    content: true,
  },
  {
    name: "an unknown event counts as content",
    event: "brand_new_event",
    data: { type: "brand_new_event" },
    content: true,
  },
  {
    name: "an unknown event whose data is a bare string counts as content",
    event: "weird",
    data: "not an object",
    content: true,
  },
];

for (const c of pulseCases) {
  Deno.test(`anthropic pulse: ${c.name}`, () => {
    assert.equal(anthropicEventIsContent(c.event, c.data), c.content);
  });
}

Deno.test("anthropic pulse: decodeStream agrees, and SSE comments are keep-alives", async () => {
  const blocks = [
    ": keep-alive\n\n",
    ...pulseCases.map((c) =>
      `event: ${c.event}\n${c.data === undefined ? "" : `data: ${JSON.stringify(c.data)}\n`}\n`
    ),
  ];
  const frames = await decode(blocks);
  assert.deepEqual(frames.map((f) => f.content), [false, ...pulseCases.map((c) => c.content)]);
});

Deno.test("anthropic pulse: data that is not JSON counts as content, as a broken stream's error", async () => {
  const [frame] = await decode(["event: content_block_delta\ndata: {not json\n\n"]);
  assert.equal(frame?.content, true);
  assert.equal(frame?.error?.code, "gw.upstream.bad_response");
});

// ---------------------------------------------------------------- requests

const tools = [{
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}];

const anthropicBody = {
  model: "smart",
  max_tokens: 1024,
  system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
  metadata: { user_id: "session-42" },
  stop_sequences: ["END"],
  temperature: 0.2,
  tools,
  tool_choice: { type: "any" },
  stream: true,
  messages: [
    {
      role: "user",
      content: [
        { type: "text", text: "What is in this picture, and the weather in Paris?" },
        {
          type: "image",
          source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" },
        },
        { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "Need the tool.", signature: "sig-abc" },
        { type: "text", text: "A cat. Checking the weather." },
        { type: "tool_use", id: "toolu_01", name: "get_weather", input: { city: "Paris" } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_01", content: [{ type: "text", text: "18C" }] },
        { type: "text", text: "Thanks!" },
      ],
    },
  ],
};

Deno.test("anthropic request: client body → IR keeps system, tools, images, history, session", () => {
  const ir = parseAnthropicRequest(anthropicBody);
  assert.equal(ir.model, "smart");
  assert.equal(ir.system, "Be brief.");
  assert.equal(ir.sessionHint, "session-42");
  assert.equal(ir.maxTokens, 1024);
  assert.equal(ir.stream, true);
  assert.deepEqual(ir.stop, ["END"]);
  assert.equal(ir.toolChoice, "required");
  assert.deepEqual(ir.tools, [{
    name: "get_weather",
    description: "Weather for a city",
    parameters: tools[0]!.input_schema,
  }]);
  assert.deepEqual(ir.messages, [
    {
      role: "user",
      content: [
        { type: "text", text: "What is in this picture, and the weather in Paris?" },
        { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
        { type: "image_url", url: "https://example.com/cat.jpg" },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "reasoning", text: "Need the tool.", signature: "sig-abc" },
        { type: "text", text: "A cat. Checking the weather." },
        { type: "tool_call", id: "toolu_01", name: "get_weather", arguments: '{"city":"Paris"}' },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", toolCallId: "toolu_01", content: "18C", isError: undefined },
        { type: "text", text: "Thanks!" },
      ],
    },
  ]);
});

Deno.test("anthropic request: client body → IR → upstream body round-trips", () => {
  const body = anthropicRequestBody(parseAnthropicRequest(anthropicBody), "claude-sonnet-4-5");
  assert.deepEqual(body, {
    model: "claude-sonnet-4-5",
    max_tokens: 1024,
    // The cache mark is kept (docs/observability.md "Where the cache is carried").
    system: anthropicBody.system,
    tools,
    tool_choice: { type: "any" },
    temperature: 0.2,
    stop_sequences: ["END"],
    stream: true,
    messages: [
      anthropicBody.messages[0],
      anthropicBody.messages[1],
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_01", content: "18C" },
          { type: "text", text: "Thanks!" },
        ],
      },
    ],
  });
});

Deno.test("anthropic request: a Chat Completions conversation becomes a valid Messages body", () => {
  const ir = parseChatRequest({
    model: "smart",
    messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Paris"}' },
          },
          {
            id: "call.2",
            type: "function",
            function: { name: "get_weather", arguments: '{"city":"Rome"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "18C" },
      { role: "tool", tool_call_id: "call.2", content: "22C" },
    ],
    tools: [{
      type: "function",
      function: { name: "get_weather", parameters: { type: "object" } },
    }],
    tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  const body = anthropicRequestBody(ir, "claude-haiku-4-5");
  // No max_tokens from the client: the model family's output limit, not a small cap.
  assert.equal(body.max_tokens, 64000);
  assert.equal(body.stream, undefined);
  assert.equal(body.system, "Be brief.");
  assert.deepEqual(body.tool_choice, { type: "tool", name: "get_weather" });
  assert.deepEqual(body.tools, [{ name: "get_weather", input_schema: { type: "object" } }]);
  assert.deepEqual(body.messages, [
    { role: "user", content: [{ type: "text", text: "Weather in Paris and Rome?" }] },
    {
      role: "assistant",
      content: [
        { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
        { type: "tool_use", id: "call_2", name: "get_weather", input: { city: "Rome" } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "call_1", content: "18C" },
        { type: "tool_result", tool_use_id: "call_2", content: "22C" },
      ],
    },
  ]);
});

Deno.test("anthropic request: IR without maxTokens gets the model family's output limit", () => {
  const ir: IrRequest = {
    model: "smart",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    stream: false,
  };
  const cases: [string, number][] = [
    ["claude-3-haiku-20240307", 4096],
    ["claude-3-5-haiku-latest", 8192],
    ["claude-3-7-sonnet-20250219", 64000],
    ["claude-opus-4-20250514", 32000],
    ["claude-opus-4-1", 32000],
    ["claude-sonnet-4-5-20250929", 64000],
    ["claude-haiku-4-5", 64000],
    ["claude-opus-4-5", 64000],
    ["claude-sonnet-4-6", 128000],
    ["my-claude-alias", 32000],
    // Vertex AI's names: the version after "@".
    ["claude-opus-4@20250514", 32000],
    ["claude-opus-4-1@20250805", 32000],
    ["claude-sonnet-4@20250514", 64000],
    ["claude-3-5-haiku@20241022", 8192],
  ];
  for (const [model, max] of cases) {
    assert.equal(anthropicRequestBody(ir, model).max_tokens, max, model);
  }
  assert.equal(anthropicRequestBody({ ...ir, maxTokens: 77 }, "claude-opus-4-1").max_tokens, 77);
});

const nativeOnlyCases: { name: string; body: Record<string, unknown>; param: string }[] = [
  {
    name: "document block",
    body: {
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "Summarise" },
          { type: "document", source: { type: "text", media_type: "text/plain", data: "x" } },
        ],
      }],
    },
    param: "messages[0].content[1].type",
  },
  {
    name: "redacted thinking",
    body: {
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: [{ type: "redacted_thinking", data: "EmwKAhgB" }] },
        { role: "user", content: "go on" },
      ],
    },
    param: "messages[1].content[0].type",
  },
  {
    name: "server tool",
    body: {
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "code_execution_20250522", name: "code_execution" }],
    },
    param: "tools[0].type",
  },
  {
    name: "MCP servers",
    body: {
      messages: [{ role: "user", content: "hi" }],
      mcp_servers: [{ type: "url", url: "https://mcp.example.com/sse", name: "x" }],
    },
    param: "mcp_servers",
  },
  {
    name: "image in a tool result",
    body: {
      messages: [{
        role: "user",
        content: [{
          type: "tool_result",
          tool_use_id: "t",
          content: [{ type: "image", source: { type: "url", url: "https://x" } }],
        }],
      }],
    },
    param: "messages[0].content[0].content[0].type",
  },
  {
    name: "image from the Files API",
    body: {
      messages: [{
        role: "user",
        content: [{ type: "image", source: { type: "file", file_id: "file_1" } }],
      }],
    },
    param: "messages[0].content[0].source.type",
  },
];

for (const c of nativeOnlyCases) {
  Deno.test(`anthropic request: ${c.name} is recorded as native-only, not refused`, () => {
    const ir = parseAnthropicRequest({ model: "smart", max_tokens: 10, ...c.body });
    assert.deepEqual(ir.nativeOnly?.map((f) => f.param), [c.param]);
    assert.ok(ir.nativeOnly?.[0]?.what);
  });
}

Deno.test("anthropic request: a plain request has no native-only features", () => {
  assert.equal(parseAnthropicRequest(anthropicBody).nativeOnly, undefined);
});

Deno.test("anthropic request: output_config.format is structured output both ways", () => {
  const schema = {
    type: "object",
    properties: { answer: { type: "number" } },
    required: ["answer"],
    additionalProperties: false,
  };
  const ir = parseAnthropicRequest({
    model: "smart",
    max_tokens: 10,
    messages: [{ role: "user", content: "2+2?" }],
    output_config: { format: { type: "json_schema", schema }, effort: "low" },
  });
  assert.deepEqual(ir.responseFormat, { type: "json_schema", name: "response", schema });
  assert.equal(ir.nativeOnly, undefined);
  const chat = parseChatRequest({
    model: "smart",
    messages: [{ role: "user", content: "2+2?" }],
    response_format: {
      type: "json_schema",
      json_schema: { name: "sum", schema, strict: true },
    },
  });
  assert.deepEqual(anthropicRequestBody(chat, "claude").output_config, {
    format: { type: "json_schema", schema },
  });
});

Deno.test("anthropic request: JSON mode without a schema cannot be translated to Anthropic", () => {
  const ir: IrRequest = {
    model: "smart",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    stream: false,
    responseFormat: { type: "json_object" },
  };
  assert.equal(anthropicUpstream.unsupportedFor(ir).length, 1);
  assert.deepEqual(anthropicUpstream.unsupportedFor({ ...ir, responseFormat: undefined }), []);
  assert.throws(
    () => anthropicRequestBody(ir, "claude"),
    (err: unknown) => err instanceof GatewayError && err.code === "gw.client.unsupported",
  );
});

Deno.test("anthropic request: a malformed output_config is refused", () => {
  const base = { model: "smart", max_tokens: 10, messages: [{ role: "user", content: "hi" }] };
  for (
    const [output_config, param] of [
      [{ format: "json" }, "output_config.format"],
      [{ format: { type: "json_schema", schema: "x" } }, "output_config.format.schema"],
    ] as const
  ) {
    assert.throws(
      () => parseAnthropicRequest({ ...base, output_config }),
      (err: unknown) => err instanceof GatewayError && err.param === param && err.status === 400,
    );
  }
});

Deno.test("anthropic request: wrong types name the field", () => {
  assert.throws(
    () => parseAnthropicRequest({ model: "smart", messages: [{ role: "user", content: 5 }] }),
    (err: unknown) => err instanceof GatewayError && err.param === "messages[0].content",
  );
});

const upstream: Upstream = {
  id: "claude",
  kind: "anthropic",
  base_url: "http://127.0.0.1:9999/",
  api_key_env: "TEST_ANTHROPIC_KEY",
  max_in_flight: 4,
  enabled: true,
};

Deno.test("anthropic upstream: pass-through sends the client body unchanged but the model", async () => {
  const passthrough = {
    ...anthropicBody,
    top_k: 5,
    thinking: { type: "enabled", budget_tokens: 2048 },
  };
  const req = await anthropicUpstream.buildRequest({
    ir: parseAnthropicRequest(passthrough),
    passthrough,
    upstream,
    model: "claude-sonnet-4-5",
    env: (name) => (name === "TEST_ANTHROPIC_KEY" ? "sk-test" : undefined),
    config: {} as Config,
  });
  assert.equal(req.url, "http://127.0.0.1:9999/v1/messages");
  assert.equal(req.headers.get("x-api-key"), "sk-test");
  assert.equal(req.headers.get("anthropic-version"), "2023-06-01");
  assert.deepEqual(await req.json(), { ...passthrough, model: "claude-sonnet-4-5" });
});

// ---------------------------------------------------------------- stream decode

const script: AnthropicScript = {
  text: ["Let me ", "check."],
  thinking: ["The user wants ", "weather."],
  toolCall: { id: "toolu_01A", name: "get_weather", argsPieces: ['{"city":', ' "Paris"}'] },
  usage: { input: 120, output: 42, cacheRead: 100 },
  pingFirst: 2,
};

/** Feeds blocks to the decoder in awkward pieces, as a network would. */
async function decode(blocks: (string | Uint8Array)[]): Promise<UpstreamFrame[]> {
  const bytes = blocks.map((b) => (typeof b === "string" ? encoder.encode(b) : b));
  const joined = new Uint8Array(bytes.reduce((n, b) => n + b.byteLength, 0));
  let at = 0;
  for (const b of bytes) {
    joined.set(b, at);
    at += b.byteLength;
  }
  const pieces: Uint8Array[] = [];
  for (let i = 0; i < joined.byteLength; i += 37) pieces.push(joined.slice(i, i + 37));
  const frames: UpstreamFrame[] = [];
  await ReadableStream.from(pieces).pipeThrough(anthropicUpstream.decodeStream()).pipeTo(
    new WritableStream({ write: (frame) => void frames.push(frame) }),
  );
  return frames;
}

Deno.test("anthropic stream decode: a recorded stream becomes IR events", async () => {
  const chunks = streamChunks(script);
  const frames = await decode(chunks);
  assert.equal(frames.length, chunks.length);
  // Raw bytes are kept per frame for pass-through.
  assert.equal(frames.map((f) => decoder.decode(f.raw)).join(""), chunks.join(""));
  const keepAlives = keepAliveCount(script);
  assert.deepEqual(
    frames.map((f) => f.content),
    chunks.map((_, i) => i >= keepAlives),
  );
  assert.deepEqual(frames[0]!.usage, {
    inputTokens: 220,
    outputTokens: 1,
    cachedTokens: 100,
    cacheWriteTokens: 0,
    reasoningTokens: undefined,
  });
  const finalUsage = {
    inputTokens: 220,
    outputTokens: 42,
    cachedTokens: 100,
    cacheWriteTokens: 0,
    reasoningTokens: undefined,
  };
  assert.deepEqual(
    frames.flatMap((f) => f.events),
    [
      { type: "start", id: "msg_01FakeUpstreamScript", model: "claude-sonnet-4-5" },
      { type: "reasoning", text: "The user wants " },
      { type: "reasoning", text: "weather." },
      {
        type: "reasoning",
        text: "",
        signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
      },
      { type: "text", text: "Let me " },
      { type: "text", text: "check." },
      { type: "tool_call_start", index: 0, id: "toolu_01A", name: "get_weather" },
      { type: "tool_call_args", index: 0, args: '{"city":' },
      { type: "tool_call_args", index: 0, args: ' "Paris"}' },
      { type: "finish", reason: "tool_calls" },
      { type: "usage", usage: finalUsage },
    ] satisfies IrEvent[],
  );
  assert.deepEqual(frames.at(-2)!.usage, finalUsage);
});

Deno.test("anthropic stream decode: an error event is content and carries the error", async () => {
  const frames = await decode([
    streamChunks({ text: [], usage: { input: 1, output: 1 } })[0]!,
    errorEvent(529, "Overloaded"),
  ]);
  const err = frames[1]!.error;
  assert.equal(frames[1]!.content, true);
  assert.ok(err instanceof GatewayError);
  assert.equal(err.code, "gw.upstream.error");
  assert.equal(err.source, "upstream");
  assert.match(err.message, /Overloaded/);
});

Deno.test("anthropic whole decode: the scripted body becomes an IR response", () => {
  const res = anthropicUpstream.decodeWhole(wholeBody(script));
  assert.equal(res.finish, "tool_calls");
  assert.deepEqual(res.usage, {
    inputTokens: 220,
    outputTokens: 42,
    cachedTokens: 100,
    cacheWriteTokens: 0,
    reasoningTokens: undefined,
  });
  assert.deepEqual(res.content, [
    { type: "reasoning", text: "The user wants weather.", signature: "EqQBCgIYAhIM" },
    { type: "text", text: "Let me check." },
    { type: "tool_call", id: "toolu_01A", name: "get_weather", arguments: '{"city":"Paris"}' },
  ]);
});

Deno.test("anthropic upstream errors: the scripted error bodies classify by status", () => {
  const rate = anthropicUpstream.decodeError(429, errorBody(429, "slow down"));
  assert.equal(rate.code, "gw.upstream.rate_limited");
  const bad = anthropicUpstream.decodeError(400, errorBody(400, "max_tokens: required"));
  assert.equal(bad.code, "gw.upstream.rejected");
  assert.equal(bad.upstreamType, "invalid_request_error");
  assert.equal(bad.publicMessage, "max_tokens: required");
});

// ---------------------------------------------------------------- client side, via the official SDK

const sdkWith = (reply: () => Response) => anthropicAnswering(reply).client;
const encodeAll = (events: IrEvent[]) => encodeEvents(anthropicClient, events);

const sdkParams = {
  model: "smart",
  max_tokens: 100,
  messages: [{ role: "user" as const, content: "hi" }],
};

/** The IR stream of a Chat Completions upstream: finish first, usage last, no start event. */
const chatLikeEvents: IrEvent[] = [
  { type: "reasoning", text: "Thinking..." },
  { type: "text", text: "Hello" },
  { type: "text", text: ", world" },
  { type: "tool_call_start", index: 0, id: "call_1", name: "get_weather" },
  { type: "tool_call_args", index: 0, args: '{"city"' },
  { type: "tool_call_args", index: 0, args: ':"Paris"}' },
  { type: "finish", reason: "tool_calls" },
  {
    type: "usage",
    usage: { inputTokens: 50, outputTokens: 9, cachedTokens: 20, reasoningTokens: 3 },
  },
];

Deno.test("anthropic stream encode: the official SDK accumulates our stream", async () => {
  const bytes = encodeAll(chatLikeEvents);
  const stream = sdkWith(() => streamResponse(bytes)).messages.stream(sdkParams);
  const texts: string[] = [];
  stream.on("text", (t) => void texts.push(t));
  const message = await stream.finalMessage();
  assert.deepEqual(texts, ["Hello", ", world"]);
  assert.equal(message.id, "msg_req-1");
  assert.equal(message.model, "smart");
  assert.equal(message.stop_reason, "tool_use");
  assert.deepEqual(message.content.map((b) => b.type), ["thinking", "text", "tool_use"]);
  const [thinking, text, tool] = message.content;
  assert.equal(thinking?.type === "thinking" && thinking.thinking, "Thinking...");
  assert.equal(text?.type === "text" && text.text, "Hello, world");
  assert.ok(tool?.type === "tool_use");
  assert.equal(tool.id, "call_1");
  assert.equal(tool.name, "get_weather");
  assert.deepEqual(tool.input, { city: "Paris" });
  assert.equal(message.usage.input_tokens, 30);
  assert.equal(message.usage.cache_read_input_tokens, 20);
  assert.equal(message.usage.output_tokens, 9);
});

Deno.test("anthropic stream encode: raw event sequence is well formed", () => {
  const text = encodeAll([{ type: "start", id: "x", model: "m" }, ...chatLikeEvents])
    .map((b) => decoder.decode(b)).join("");
  const names = [...text.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
  assert.deepEqual(names, [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
});

Deno.test("anthropic stream encode: a pass-through stream gets nothing added on close", () => {
  const enc = anthropicClient.streamEncoder({ id: "req-1", model: "smart" });
  assert.equal(enc.open(), null);
  assert.equal(enc.close(), null);
});

Deno.test("anthropic stream encode: usage alone opens nothing, plain stop stays end_turn", async () => {
  const bytes = encodeAll([
    { type: "usage", usage: { inputTokens: 7 } },
    { type: "text", text: "ok" },
    { type: "finish", reason: "length" },
  ]);
  const message = await sdkWith(() => streamResponse(bytes)).messages.stream(sdkParams)
    .finalMessage();
  assert.equal(message.stop_reason, "max_tokens");
  assert.equal(message.usage.input_tokens, 7);
  assert.deepEqual(message.content, [{ type: "text", text: "ok" }]);
});

Deno.test("anthropic whole encode: the official SDK reads our answer", async () => {
  const res: IrResponse = {
    id: "chatcmpl-9",
    model: "gpt-5",
    content: [
      { type: "text", text: "Checking." },
      { type: "tool_call", id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
    ],
    // Providers such as Gemini finish a tool-calling turn with a plain stop.
    finish: "stop",
    usage: { inputTokens: 10, outputTokens: 4 },
  };
  const body = JSON.stringify(anthropicClient.encodeWhole(res));
  const message = await sdkWith(() =>
    new Response(body, { headers: { "content-type": "application/json" } })
  ).messages.create(sdkParams);
  assert.equal(message.id, "msg_chatcmpl-9");
  assert.equal(message.stop_reason, "tool_use");
  assert.deepEqual(message.content[1], {
    type: "tool_use",
    id: "call_1",
    name: "get_weather",
    input: { city: "Paris" },
  });
  assert.equal(message.usage.input_tokens, 10);
  assert.equal(message.usage.output_tokens, 4);
});

// ---------------------------------------------------------------- errors

const errorCases: { status: number; err: GatewayError; type: string }[] = [
  {
    status: 400,
    err: new GatewayError("'messages' must be an array", {
      code: "gw.client.invalid_request",
      source: "client",
      status: 400,
    }),
    type: "invalid_request_error",
  },
  {
    status: 429,
    err: upstreamStatusError(429, { body: errorBody(429, "slow down") }),
    type: "rate_limit_error",
  },
  { status: 499, err: clientDisconnected(), type: "api_error" },
  {
    status: 504,
    err: idleTimeout("claude", { secs: 30, midStream: false, timeoutStatus: 504 }).withTried([
      "claude",
      "openai",
    ]),
    type: "timeout_error",
  },
];

for (const c of errorCases) {
  Deno.test(`anthropic errors: ${c.status} renders whole and the SDK reads it`, async () => {
    assert.equal(c.err.status, c.status);
    const body = anthropicClient.renderError(c.err);
    assert.deepEqual(body, {
      type: "error",
      error: { type: c.type, message: c.err.publicMessage, details: { error_code: c.err.code } },
    });
    const sdk = sdkWith(() =>
      new Response(JSON.stringify(body), {
        status: c.status,
        headers: { "content-type": "application/json" },
      })
    );
    const thrown = await sdk.messages.create(sdkParams).then(() => null, (e: unknown) => e);
    assert.ok(thrown instanceof Anthropic.APIError);
    assert.equal(thrown.status, c.status);
    assert.equal(thrown.type, c.type);
    assert.equal(thrown.errorCode, c.err.code);
    assert.equal(thrown.apiMessage, c.err.publicMessage);
  });

  Deno.test(`anthropic errors: ${c.status} in a stream is an error event the SDK throws`, async () => {
    const enc = anthropicClient.streamEncoder({ id: "req-2", model: "smart" });
    const bytes = [enc.encode({ type: "text", text: "partial" }), enc.error(c.err)]
      .filter((b): b is Uint8Array => b !== null);
    assert.match(decoder.decode(bytes.at(-1)), /^event: error\ndata: /);
    const stream = await sdkWith(() => streamResponse(bytes)).messages.create({
      ...sdkParams,
      stream: true,
    });
    const seen: string[] = [];
    const thrown = await (async () => {
      for await (const event of stream) seen.push(event.type);
    })().then(() => null, (e: unknown) => e);
    assert.deepEqual(seen, ["message_start", "content_block_start", "content_block_delta"]);
    assert.ok(thrown instanceof Anthropic.APIError);
    assert.equal(thrown.type, c.type);
    assert.equal(thrown.errorCode, c.err.code);
  });
}

/** The SSE event names and their data's `index` or `error.type`, in order. */
function eventsOf(bytes: Uint8Array): string[] {
  return decoder.decode(bytes).split("\n\n").filter(Boolean).map((block) => {
    const name = /^event: (.*)$/m.exec(block)?.[1];
    const data = JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "{}");
    return `${name}${data.index !== undefined ? ` ${data.index}` : ""}${
      data.error ? ` ${data.error.type}` : ""
    }`;
  });
}

/** An upstream's chunks read as the gateway reads them, frame by frame. */
function decodeFrames(chunks: (string | Uint8Array)[]): UpstreamFrame[] {
  const decode = anthropicUpstream.frameDecoder!();
  const frames = chunks.flatMap((c) => decode.push(typeof c === "string" ? encoder.encode(c) : c));
  return [...frames, ...decode.end()];
}

/** The stream an operator's stop ends, after `before` went to the encoder. */
function stoppedAfter(before: (enc: ClientStreamEncoder) => void): string[] {
  const enc = anthropicClient.streamEncoder({ id: "req-9", model: "smart" });
  before(enc);
  return eventsOf(enc.error(abortedByOperator())).filter((e) => e !== "message_start");
}

Deno.test("anthropic errors: an operator's stop ends the open block first, or an empty one", () => {
  // Claude Code re-sends (non-streamed) a turn whose stream failed before a content block
  // ended, whatever the error; after one ended it takes a non-server error as final.
  assert.deepEqual(stoppedAfter((enc) => enc.encode({ type: "text", text: "Hel" })), [
    "content_block_stop 0",
    "error invalid_request_error",
  ]);
  assert.deepEqual(stoppedAfter(() => {}), [
    "content_block_start 0",
    "content_block_stop 0",
    "error invalid_request_error",
  ]);
  // Passed through as the upstream sent it: its own block indexes, as its frames told them.
  const frames = decodeFrames(streamChunks({ text: ["a", "b"], usage: { input: 1, output: 1 } }))
    .filter((f) => /content_block_(start|delta)/.test(decoder.decode(f.raw)));
  assert.deepEqual(stoppedAfter((enc) => frames.forEach((f) => enc.passed?.(f))), [
    "content_block_stop 0",
    "error invalid_request_error",
  ]);
  const ended = decodeFrames(streamChunks({ text: ["a"], usage: { input: 1, output: 1 } }))
    .filter((f) => !/message_(delta|stop)/.test(decoder.decode(f.raw)));
  assert.deepEqual(stoppedAfter((enc) => ended.forEach((f) => enc.passed?.(f))), [
    "error invalid_request_error",
  ]);
  // Any other error leaves the stream as it stands: Claude Code's own retry is then welcome.
  const enc = anthropicClient.streamEncoder({ id: "req-10", model: "smart" });
  enc.encode({ type: "text", text: "Hel" });
  const other = idleTimeout("claude", { secs: 30, midStream: true, timeoutStatus: 504 });
  assert.deepEqual(eventsOf(enc.error(other)), ["error timeout_error"]);
});

Deno.test("anthropic errors: the timeout type survives a 503 timeout_status", () => {
  const err = idleTimeout("claude", { secs: 30, midStream: true, timeoutStatus: 503 });
  const body = anthropicClient.renderError(err) as { error: { type: string } };
  assert.equal(body.error.type, "timeout_error");
});

Deno.test("anthropic errors: a foreign upstream type falls back to the status's type", () => {
  const err = upstreamStatusError(400, {
    body: JSON.stringify({ error: { code: 400, message: "bad", status: "INVALID_ARGUMENT" } }),
  });
  const body = anthropicClient.renderError(err) as { error: { type: string } };
  assert.equal(body.error.type, "invalid_request_error");
});
