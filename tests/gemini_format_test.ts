import assert from "node:assert/strict";
import { ApiError } from "@google/genai";
import { encodeText, genaiAnswering } from "./format_kit.ts";
import type { Config, Upstream } from "../gateway/config/schema.ts";
import type { UpstreamFrame } from "../gateway/formats/format.ts";
import { clientError, GatewayError } from "../gateway/runtime/gateway_error.ts";
import type { IrEvent, IrRequest } from "../gateway/formats/ir.ts";
import { chatClient } from "../gateway/formats/openai_chat/mod.ts";
import { geminiClient, geminiUpstream } from "../gateway/formats/gemini/mod.ts";
import { geminiChunkIsContent } from "../gateway/formats/gemini/pulse.ts";
import { geminiRequestBody } from "../gateway/formats/gemini/request.ts";
import { abortedByOperator, idleTimeout } from "../gateway/forward/stop_reasons.ts";
import {
  errorBody,
  errorChunk,
  errorEvent,
  type GeminiScript,
  keepAliveCount,
  streamChunks,
  wholeBody,
} from "./fake_upstreams/gemini_script.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---------------------------------------------------------------- pulse (docs/design.md "Pulse")

const pulseCases: { name: string; data: unknown; content: boolean }[] = [
  {
    name: "candidate with no parts and no finish reason (keep-alive)",
    data: { candidates: [{ content: { role: "model" }, index: 0 }], modelVersion: "m" },
    content: false,
  },
  {
    name: "candidate with empty parts and running usage (keep-alive)",
    data: {
      candidates: [{ content: { role: "model", parts: [] }, index: 0 }],
      usageMetadata: { promptTokenCount: 5, totalTokenCount: 5 },
    },
    content: false,
  },
  {
    name: "only an empty text part (keep-alive)",
    data: { candidates: [{ content: { parts: [{ text: "" }], role: "model" }, index: 0 }] },
    content: false,
  },
  { name: "bookkeeping fields only (keep-alive)", data: { responseId: "r" }, content: false },
  {
    name: "text part",
    data: { candidates: [{ content: { parts: [{ text: "Hi" }], role: "model" } }] },
    content: true,
  },
  {
    name: "thought part (reasoning)",
    data: { candidates: [{ content: { parts: [{ text: "hmm", thought: true }] } }] },
    content: true,
  },
  {
    name: "functionCall part",
    data: { candidates: [{ content: { parts: [{ functionCall: { name: "f", args: {} } }] } }] },
    content: true,
  },
  {
    name: "finish reason without parts",
    data: { candidates: [{ finishReason: "STOP", index: 0 }] },
    content: true,
  },
  {
    name: "usageMetadata-only closing chunk",
    data: { usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 7 }, modelVersion: "m" },
    content: true,
  },
  {
    name: "blocked prompt",
    data: { promptFeedback: { blockReason: "SAFETY" } },
    content: true,
  },
  {
    name: "in-stream error",
    data: { error: { code: 500, message: "boom", status: "INTERNAL" } },
    content: true,
  },
  { name: "unknown top-level field", data: { somethingNew: { x: 1 } }, content: true },
  { name: "candidates of an unknown shape", data: { candidates: "soon" }, content: true },
  { name: "not an object", data: [1, 2], content: true },
];

for (const c of pulseCases) {
  Deno.test(`gemini pulse: ${c.name} → ${c.content ? "content" : "keep-alive"}`, async () => {
    assert.equal(geminiChunkIsContent(c.data), c.content);
    const [frame] = await decodeFrames([`data: ${JSON.stringify(c.data)}\r\n\r\n`]);
    assert.equal(frame?.content, c.content);
  });
}

Deno.test("gemini pulse: SSE comments and unparseable data", async () => {
  const frames = await decodeFrames([": keep-alive\n\n", "data: {not json\n\n"]);
  assert.deepEqual(frames.map((f) => f.content), [false, true]);
});

// ---------------------------------------------------------------- requests

const weatherTool = {
  name: "get_weather",
  description: "Weather for a city",
  parameters: {
    type: "OBJECT",
    properties: {
      city: { type: "STRING", description: "City name" },
      days: { type: "INTEGER", nullable: true },
    },
    required: ["city"],
    propertyOrdering: ["city", "days"],
  },
};

Deno.test("gemini parse: system, tools, images, multi-turn calls without ids", () => {
  const ir = geminiClient.parseRequest({
    system_instruction: { parts: [{ text: "Be brief." }, { text: "Use metric." }] },
    contents: [
      {
        role: "user",
        parts: [
          { text: "Weather in Paris and Rome? Also this:" },
          { inline_data: { mime_type: "image/png", data: "iVBORw0KGgo=" } },
          { fileData: { mimeType: "image/jpeg", fileUri: "https://example.com/cat.jpg" } },
        ],
      },
      {
        role: "model",
        parts: [
          { text: "checking", thought: true, thoughtSignature: "sig" },
          { functionCall: { name: "get_weather", args: { city: "Paris" } }, thoughtSignature: "s" },
          { functionCall: { name: "get_weather", args: { city: "Rome" } } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { name: "get_weather", response: { output: "Sunny, 21C" } } },
          { functionResponse: { name: "get_weather", response: { error: "no station" } } },
        ],
      },
    ],
    tools: [{ functionDeclarations: [weatherTool] }],
    toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } },
    generationConfig: { maxOutputTokens: 256, temperature: 0.2, topP: 0.9, stopSequences: ["END"] },
    safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_NONE" }],
  }, { pathModel: "smart", pathStream: true, sse: true });

  assert.equal(ir.model, "smart");
  assert.equal(ir.stream, true);
  assert.equal(ir.system, "Be brief.\nUse metric.");
  assert.deepEqual(ir.toolChoice, { name: "get_weather" });
  assert.equal(ir.maxTokens, 256);
  assert.equal(ir.temperature, 0.2);
  assert.equal(ir.topP, 0.9);
  assert.deepEqual(ir.stop, ["END"]);
  assert.deepEqual(ir.tools, [{
    name: "get_weather",
    description: "Weather for a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", description: "City name" },
        days: { type: ["integer", "null"] },
      },
      required: ["city"],
    },
  }]);
  assert.deepEqual(ir.messages, [
    {
      role: "user",
      content: [
        { type: "text", text: "Weather in Paris and Rome? Also this:" },
        { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
        { type: "image_url", url: "https://example.com/cat.jpg" },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "reasoning", text: "checking" },
        { type: "tool_call", id: "call_0", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "tool_call", id: "call_1", name: "get_weather", arguments: '{"city":"Rome"}' },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", toolCallId: "call_0", name: "get_weather", content: "Sunny, 21C" },
        {
          type: "tool_result",
          toolCallId: "call_1",
          name: "get_weather",
          content: "no station",
          isError: true,
        },
      ],
    },
  ]);
});

Deno.test("gemini parse: ids the client echoes pair calls with responses", () => {
  const ir = geminiClient.parseRequest({
    contents: [
      { role: "user", parts: [{ text: "go" }] },
      {
        role: "model",
        parts: [
          { functionCall: { id: "a", name: "f", args: {} } },
          { functionCall: { id: "b", name: "f", args: {} } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { id: "b", name: "f", response: { v: 2 } } },
          { functionResponse: { name: "f", response: { v: 1 } } },
        ],
      },
    ],
  }, { pathModel: "models/smart" });
  assert.equal(ir.model, "smart");
  assert.equal(ir.stream, false);
  assert.deepEqual(ir.messages[2]?.content, [
    { type: "tool_result", toolCallId: "b", name: "f", content: '{"v":2}' },
    { type: "tool_result", toolCallId: "a", name: "f", content: '{"v":1}' },
  ]);
});

Deno.test("gemini parse: records what no other format can express as native-only", () => {
  const base = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };
  const nativeOnly: [string, Record<string, unknown>, string][] = [
    ["code execution", { ...base, tools: [{ codeExecution: {} }] }, "tools[0].codeExecution"],
    [
      "an enum MIME type",
      { ...base, generationConfig: { responseMimeType: "text/x.enum" } },
      "generationConfig.responseMimeType",
    ],
    [
      "a schema without JSON mode",
      { ...base, generationConfig: { responseSchema: { type: "OBJECT" } } },
      "generationConfig.responseMimeType",
    ],
    [
      "a PDF",
      {
        contents: [{
          parts: [{ text: "read" }, { inlineData: { mimeType: "application/pdf", data: "JVBE" } }],
        }],
      },
      "contents[0].parts[1].inlineData.mimeType",
    ],
    [
      "code execution parts",
      { contents: [{ parts: [{ executableCode: { code: "1", language: "PYTHON" } }] }] },
      "contents[0].parts[0].executableCode",
    ],
    ["cached content", { ...base, cachedContent: "cachedContents/abc" }, "cachedContent"],
    [
      "several candidates",
      { ...base, generationConfig: { candidateCount: 2 } },
      "generationConfig.candidateCount",
    ],
    [
      "audio output",
      { ...base, generationConfig: { responseModalities: ["AUDIO"] } },
      "generationConfig.responseModalities",
    ],
  ];
  for (const [what, body, param] of nativeOnly) {
    const ir = geminiClient.parseRequest(body, { pathModel: "smart" });
    assert.deepEqual(ir.nativeOnly?.map((f) => f.param), [param], what);
  }
  assert.equal(geminiClient.parseRequest(base, { pathModel: "smart" }).nativeOnly, undefined);
  assert.throws(
    () => geminiClient.parseRequest(base, {}),
    (err: unknown) => err instanceof GatewayError && err.param === "model",
  );
  assert.throws(
    () => geminiClient.parseRequest({ contents: "hi" }, { pathModel: "smart" }),
    (err: unknown) => err instanceof GatewayError && err.param === "contents",
  );
});

Deno.test("gemini parse: JSON mode and response schemas are structured output", () => {
  const base = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };
  const parse = (generationConfig: Record<string, unknown>) =>
    geminiClient.parseRequest({ ...base, generationConfig }, { pathModel: "smart" });
  const json = { type: "object", properties: { a: { type: "string" } } };
  assert.deepEqual(parse({ responseMimeType: "application/json" }).responseFormat, {
    type: "json_object",
  });
  assert.deepEqual(
    parse({ responseMimeType: "application/json", responseJsonSchema: json }).responseFormat,
    { type: "json_schema", name: "response", schema: json },
  );
  // The OpenAPI subset is converted to JSON Schema, as for function declarations.
  assert.deepEqual(
    parse({
      response_mime_type: "application/json",
      response_schema: { type: "OBJECT", properties: { a: { type: "STRING", nullable: true } } },
    }).responseFormat,
    {
      type: "json_schema",
      name: "response",
      schema: { type: "object", properties: { a: { type: ["string", "null"] } } },
    },
  );
  assert.equal(parse({ responseMimeType: "text/plain" }).responseFormat, undefined);
  assert.throws(
    () => parse({ responseMimeType: "application/json", responseJsonSchema: "x" }),
    (err: unknown) =>
      err instanceof GatewayError && err.param === "generationConfig.responseJsonSchema",
  );
});

Deno.test("gemini upstream body: response_format becomes responseMimeType and a JSON schema", () => {
  const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
  const ir = chatClient.parseRequest({
    model: "smart",
    messages: [{ role: "user", content: "count" }],
    max_tokens: 5,
    response_format: { type: "json_schema", json_schema: { name: "c", schema, strict: true } },
  }, {});
  assert.deepEqual(geminiRequestBody(ir).generationConfig, {
    maxOutputTokens: 5,
    responseMimeType: "application/json",
    responseJsonSchema: schema,
  });
  const jsonMode = { ...ir, responseFormat: { type: "json_object" as const } };
  assert.deepEqual(geminiRequestBody(jsonMode).generationConfig, {
    maxOutputTokens: 5,
    responseMimeType: "application/json",
  });
  assert.deepEqual(geminiUpstream.unsupportedFor(ir), []);
});

/** A Chat Completions conversation with a tool round trip, read by the chat codec. */
function chatConversation(): IrRequest {
  return chatClient.parseRequest({
    model: "smart",
    stream: true,
    max_tokens: 100,
    messages: [
      { role: "system", content: "Be brief." },
      {
        role: "user",
        content: [
          { type: "text", text: "What is this, and the weather?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "image_url", image_url: { url: "https://example.com/a.webp?x=1" } },
        ],
      },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [{
          id: "call_abc",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Paris"}' },
        }],
      },
      { role: "tool", tool_call_id: "call_abc", content: "Sunny" },
    ],
    tools: [{
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather",
        parameters: {
          type: "object",
          properties: { city: { type: "string" } },
          additionalProperties: false,
        },
      },
    }],
    tool_choice: "required",
  }, {});
}

Deno.test("gemini upstream body: chat history → generateContent", () => {
  const body = geminiRequestBody(chatConversation());
  assert.deepEqual(body, {
    contents: [
      {
        role: "user",
        parts: [
          { text: "What is this, and the weather?" },
          { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } },
          { fileData: { mimeType: "image/webp", fileUri: "https://example.com/a.webp?x=1" } },
        ],
      },
      {
        role: "model",
        parts: [
          { text: "Let me check." },
          {
            functionCall: { name: "get_weather", args: { city: "Paris" } },
            thoughtSignature: "skip_thought_signature_validator",
          },
        ],
      },
      {
        role: "user",
        parts: [{ functionResponse: { name: "get_weather", response: { output: "Sunny" } } }],
      },
    ],
    systemInstruction: { parts: [{ text: "Be brief." }] },
    tools: [{
      functionDeclarations: [{
        name: "get_weather",
        description: "Weather",
        parametersJsonSchema: {
          type: "object",
          properties: { city: { type: "string" } },
          additionalProperties: false,
        },
      }],
    }],
    toolConfig: { functionCallingConfig: { mode: "ANY" } },
    generationConfig: { maxOutputTokens: 100 },
  });
});

Deno.test("gemini upstream body: a tool result with no earlier call is refused", () => {
  assert.throws(
    () =>
      geminiRequestBody({
        model: "m",
        stream: false,
        messages: [{
          role: "user",
          content: [{ type: "tool_result", toolCallId: "x", content: "1" }],
        }],
      }),
    (err: unknown) => err instanceof GatewayError && err.status === 400,
  );
});

Deno.test("gemini round trip: a Gemini body survives parse → IR → body", () => {
  const original = {
    systemInstruction: { parts: [{ text: "sys" }] },
    contents: [
      {
        role: "user",
        parts: [{ text: "hi" }, { inlineData: { mimeType: "image/png", data: "AA==" } }],
      },
      { role: "model", parts: [{ functionCall: { name: "f", args: { a: 1 } } }] },
      { role: "user", parts: [{ functionResponse: { name: "f", response: { result: 2 } } }] },
    ],
    tools: [{ functionDeclarations: [{ name: "f", parametersJsonSchema: { type: "object" } }] }],
    generationConfig: { maxOutputTokens: 5 },
  };
  const body = geminiRequestBody(geminiClient.parseRequest(original, { pathModel: "m" }));
  assert.deepEqual(body.contents, [
    original.contents[0],
    {
      role: "model",
      parts: [{
        functionCall: { name: "f", args: { a: 1 } },
        thoughtSignature: "skip_thought_signature_validator",
      }],
    },
    original.contents[2],
  ]);
  assert.deepEqual(body.systemInstruction, original.systemInstruction);
  assert.deepEqual(body.generationConfig, original.generationConfig);
});

const upstream: Upstream = {
  kind: "gemini",
  id: "gem",
  base_url: "http://127.0.0.1:9/",
  api_key_env: "GEMINI_KEY",
  max_in_flight: 4,
  enabled: true,
};

function call(ir: IrRequest, passthrough?: Record<string, unknown>) {
  return {
    ir,
    passthrough,
    upstream,
    model: "gemini-2.5-flash",
    env: (name: string) => (name === "GEMINI_KEY" ? "k-123" : undefined),
    config: {} as Config,
  };
}

Deno.test("gemini buildRequest: URL per mode, key header, pass-through body unchanged", async () => {
  const ir = chatConversation();
  const streamed = await geminiUpstream.buildRequest(call(ir));
  assert.equal(
    streamed.url,
    "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
  );
  assert.equal(streamed.headers.get("x-goog-api-key"), "k-123");
  assert.equal(streamed.method, "POST");
  const whole = await geminiUpstream.buildRequest(call({ ...ir, stream: false }));
  assert.equal(whole.url, "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:generateContent");

  const native = {
    contents: [{ role: "user", parts: [{ text: "hi" }] }],
    tools: [{ googleSearch: {} }],
    safetySettings: [{ category: "HARM_CATEGORY_HATE_SPEECH", threshold: "BLOCK_NONE" }],
  };
  const passed = await geminiUpstream.buildRequest(call(ir, native));
  assert.deepEqual(await passed.json(), native);
});

// ---------------------------------------------------------------- upstream stream decode

/** A recorded gemini-2.5-flash stream: thoughts, text, a call, then STOP with usage. */
const recordedStream = [
  'data: {"candidates": [{"content": {"role": "model"},"index": 0}],"usageMetadata": ' +
  '{"promptTokenCount": 31,"totalTokenCount": 31},"modelVersion": "gemini-2.5-flash",' +
  '"responseId": "Rk3Xa-AbC"}\r\n\r\n',
  'data: {"candidates": [{"content": {"parts": [{"text": "**Checking** the city","thought": ' +
  'true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 31,' +
  '"totalTokenCount": 31},"modelVersion": "gemini-2.5-flash","responseId": "Rk3Xa-AbC"}\r\n\r\n',
  'data: {"candidates": [{"content": {"parts": [{"text": "Let me look"}],"role": "model"},' +
  '"index": 0}],"usageMetadata": {"promptTokenCount": 31,"totalTokenCount": 31},' +
  '"modelVersion": "gemini-2.5-flash","responseId": "Rk3Xa-AbC"}\r\n\r\n',
  'data: {"candidates": [{"content": {"parts": [{"text": " that up."}],"role": "model"},' +
  '"index": 0}],"usageMetadata": {"promptTokenCount": 31,"totalTokenCount": 31},' +
  '"modelVersion": "gemini-2.5-flash","responseId": "Rk3Xa-AbC"}\r\n\r\n',
  'data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather",' +
  '"args": {"city": "Paris"}},"thoughtSignature": "CiQBVKhc"}],"role": "model"},' +
  '"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 31,' +
  '"candidatesTokenCount": 18,"totalTokenCount": 73,"cachedContentTokenCount": 8,' +
  '"thoughtsTokenCount": 24},"modelVersion": "gemini-2.5-flash","responseId": "Rk3Xa-AbC"}\r\n\r\n',
];

Deno.test("gemini stream decode: recorded stream → IR events, pulse and usage", async () => {
  // Split mid-event to prove framing does not depend on chunk boundaries.
  const bytes = recordedStream.join("");
  const frames = await decodeFrames([bytes.slice(0, 100), bytes.slice(100, 517), bytes.slice(517)]);
  assert.deepEqual(frames.map((f) => f.content), [false, true, true, true, true]);
  assert.equal(frames.map((f) => decoder.decode(f.raw)).join(""), bytes);
  assert.deepEqual(
    frames.flatMap((f) => f.events),
    [
      { type: "reasoning", text: "**Checking** the city" },
      { type: "text", text: "Let me look" },
      { type: "text", text: " that up." },
      { type: "tool_call_start", index: 0, id: "call_Rk3Xa-AbC_0", name: "get_weather" },
      { type: "tool_call_args", index: 0, args: '{"city":"Paris"}' },
      { type: "finish", reason: "tool_calls" },
      {
        type: "usage",
        usage: { inputTokens: 31, outputTokens: 42, cachedTokens: 8, reasoningTokens: 24 },
      },
    ] satisfies IrEvent[],
  );
  assert.deepEqual(frames[0]?.usage, {
    inputTokens: 31,
    outputTokens: undefined,
    cachedTokens: undefined,
    reasoningTokens: undefined,
  });
});

Deno.test("gemini stream decode: in-stream error becomes the frame's error", async () => {
  const text = { text: ["Hi"], usage: { input: 1, output: 1 } };
  // Google's own shape: a bare, pretty-printed object after the last event, split
  // across network chunks; and the `data:` event some compatible proxies send.
  const google = errorChunk(503, "The model is overloaded.");
  const cases = [
    [streamChunks(text)[0]!, google.slice(0, 20), google.slice(20)],
    [streamChunks(text)[0]!, errorEvent(503, "The model is overloaded.")],
  ];
  for (const chunks of cases) {
    const frames = await decodeFrames(chunks);
    assert.equal(frames.length, 2);
    assert.equal(frames[0]?.error, undefined);
    assert.equal(frames[1]?.content, true);
    assert.equal(frames[1]?.error?.code, "gw.upstream.error");
    assert.equal(frames[1]?.error?.status, 502);
    assert.match(frames[1]?.error?.message ?? "", /overloaded/);
  }
});

Deno.test("gemini fake script: stream, whole and error bodies decode as scripted", async () => {
  const script: GeminiScript = {
    text: ["Hel", "lo"],
    thinking: ["mull"],
    toolCall: { id: "fc_1", name: "lookup", argsPieces: ['{"q":', '"x"}'] },
    usage: { input: 10, output: 30, cached: 2, thoughts: 12 },
    pingFirst: 2,
  };
  const frames = await decodeFrames(streamChunks(script));
  assert.deepEqual(
    frames.map((f) => f.content),
    [false, false, true, true, true, true],
  );
  assert.equal(frames.filter((f) => !f.content).length, keepAliveCount(script));
  assert.deepEqual(frames.flatMap((f) => f.events).map((e) => e.type), [
    "reasoning",
    "text",
    "text",
    "tool_call_start",
    "tool_call_args",
    "finish",
    "usage",
  ]);
  const whole = geminiUpstream.decodeWhole(wholeBody(script));
  assert.deepEqual(whole.content, [
    { type: "reasoning", text: "mull" },
    { type: "text", text: "Hello" },
    { type: "tool_call", id: "fc_1", name: "lookup", arguments: '{"q":"x"}' },
  ]);
  assert.equal(whole.finish, "tool_calls");
  assert.deepEqual(whole.usage, {
    inputTokens: 10,
    outputTokens: 30,
    cachedTokens: 2,
    reasoningTokens: 12,
  });
  const limited = geminiUpstream.decodeError(429, errorBody(429, "Quota exceeded"));
  assert.equal(limited.code, "gw.upstream.rate_limited");
  const rejected = geminiUpstream.decodeError(400, errorBody(400, "Bad field"));
  assert.equal(rejected.code, "gw.upstream.rejected");
  assert.equal(rejected.upstreamType, "INVALID_ARGUMENT");
});

Deno.test("gemini whole decode: blocked prompt and unreadable bodies", () => {
  const blocked = geminiUpstream.decodeWhole(JSON.stringify({
    promptFeedback: { blockReason: "PROHIBITED_CONTENT" },
    usageMetadata: { promptTokenCount: 4, totalTokenCount: 4 },
  }));
  assert.equal(blocked.finish, "content_filter");
  assert.deepEqual(blocked.content, []);
  assert.throws(
    () => geminiUpstream.decodeWhole("<html>"),
    (err: unknown) => err instanceof GatewayError && err.code === "gw.upstream.bad_response",
  );
});

// ---------------------------------------------------------------- client encoding

/** Events as a Chat Completions upstream would produce them: arguments in pieces. */
const translatedEvents: IrEvent[] = [
  { type: "start", id: "up-1", model: "gpt-5" },
  { type: "reasoning", text: "thinking…" },
  { type: "text", text: "Hello" },
  { type: "text", text: " world" },
  { type: "tool_call_start", index: 0, id: "call_abc", name: "get_weather" },
  { type: "tool_call_args", index: 0, args: '{"ci' },
  { type: "tool_call_args", index: 0, args: 'ty":"Paris"}' },
  { type: "finish", reason: "tool_calls" },
  {
    type: "usage",
    usage: { inputTokens: 12, outputTokens: 20, cachedTokens: 4, reasoningTokens: 5 },
  },
];

function encodeAll(sse: boolean, opts: { fail?: GatewayError } = {}): string {
  const meta = { sse, pathStream: true };
  return encodeText(geminiClient, translatedEvents, { meta, fail: opts.fail });
}

Deno.test("gemini client stream (SSE): the official SDK parses the encoder's bytes", async () => {
  const shape = geminiClient.streamShape({ sse: true, pathStream: true });
  assert.equal(shape.keepAlive, null);
  assert.equal(shape.passthroughFrom, "gemini");
  assert.equal(shape.contentType, "text/event-stream");
  const body = encodeAll(true);
  const { client: ai, sent } = genaiAnswering(() =>
    new Response(body, { headers: { "content-type": shape.contentType } })
  );
  const chunks = [];
  for await (
    const chunk of await ai.models.generateContentStream({ model: "smart", contents: "hi" })
  ) {
    chunks.push(chunk);
  }
  assert.match(sent[0]?.url ?? "", /\/v1beta\/models\/smart:streamGenerateContent\?alt=sse$/);
  assert.equal(sent[0]?.headers.get("x-goog-api-key"), "test-key");
  assert.deepEqual(chunks.map((c) => c.text), [undefined, "Hello", " world", undefined, ""]);
  assert.equal(chunks[0]?.candidates?.[0]?.content?.parts?.[0]?.thought, true);
  assert.deepEqual(chunks[3]?.functionCalls, [{
    id: "call_abc",
    name: "get_weather",
    args: { city: "Paris" },
  }]);
  const last = chunks.at(-1);
  assert.equal(last?.candidates?.[0]?.finishReason, "STOP");
  assert.deepEqual(last?.usageMetadata, {
    promptTokenCount: 12,
    candidatesTokenCount: 15,
    totalTokenCount: 32,
    cachedContentTokenCount: 4,
    thoughtsTokenCount: 5,
  });
  assert.equal(last?.responseId, "req-1");
  assert.equal(last?.modelVersion, "smart");
});

Deno.test("gemini client stream (SSE): a chat session records the streamed turn", async () => {
  const { client: ai, sent } = genaiAnswering(() => new Response(encodeAll(true)));
  const chat = ai.chats.create({ model: "smart" });
  for await (const _ of await chat.sendMessageStream({ message: "hi" })) {
    // drain
  }
  // The SDK keeps a streamed turn only when every chunk has a part; else it records `parts: []`.
  const [question, ...answer] = chat.getHistory();
  assert.equal(question?.role, "user");
  assert.ok(answer.length > 1);
  assert.ok(answer.every((c) => c.role === "model" && (c.parts?.length ?? 0) > 0));
  await chat.sendMessageStream({ message: "again" });
  const next = await sent[1]?.json();
  assert.equal(next.contents.length, 7, "one model content per streamed chunk");
  const ir = geminiClient.parseRequest(next, { pathModel: "smart", pathStream: true, sse: true });
  assert.deepEqual(ir.messages.map((m) => m.role), ["user", "assistant", "user"]);
  assert.deepEqual(ir.messages[1]?.content, [
    { type: "reasoning", text: "thinking…" },
    { type: "text", text: "Hello" },
    { type: "text", text: " world" },
    { type: "tool_call", id: "call_abc", name: "get_weather", arguments: '{"city":"Paris"}' },
  ]);
});

Deno.test("gemini client stream (JSON array): one parseable array", () => {
  const shape = geminiClient.streamShape({ sse: false, pathStream: true });
  assert.equal(shape.contentType, "application/json");
  assert.equal(shape.passthroughFrom, null);
  const body = encodeAll(false);
  assert.ok(body.startsWith("[{") && body.endsWith("}]"));
  const items = JSON.parse(body);
  assert.equal(items.length, 5);
  assert.equal(items[1].candidates[0].content.parts[0].text, "Hello");
  assert.deepEqual(items[3].candidates[0].content.parts[0].functionCall.args, { city: "Paris" });
  assert.equal(items[4].candidates[0].finishReason, "STOP");
  const empty = geminiClient.streamEncoder({ id: "r", model: "m", sse: false });
  const bytes = [empty.open(), empty.close()].map((b) => (b ? decoder.decode(b) : "")).join("");
  assert.deepEqual(JSON.parse(bytes), []);
});

Deno.test("gemini client whole: the official SDK reads the encoded answer", async () => {
  const res = geminiClient.encodeWhole({
    id: "resp-9",
    model: "smart",
    content: [
      { type: "reasoning", text: "because", signature: "anthropic-sig" },
      { type: "text", text: "It is sunny." },
      { type: "tool_call", id: "toolu_1", name: "get_weather", arguments: '{"city":"Oslo"}' },
    ],
    finish: "tool_calls",
    usage: { inputTokens: 9, outputTokens: 4 },
  });
  const { client: ai } = genaiAnswering(() => Response.json(res));
  const answer = await ai.models.generateContent({ model: "smart", contents: "hi" });
  assert.equal(answer.text, "It is sunny.");
  assert.deepEqual(answer.functionCalls, [{
    id: "toolu_1",
    name: "get_weather",
    args: { city: "Oslo" },
  }]);
  assert.equal(answer.candidates?.[0]?.finishReason, "STOP");
  assert.equal(answer.usageMetadata?.totalTokenCount, 13);
  assert.equal(
    JSON.stringify(res).includes("anthropic-sig"),
    false,
    "foreign signatures stay out",
  );
});

// ---------------------------------------------------------------- errors

/** `code`: the status the client gets, where it is not the error's own (an operator's stop). */
const errorCases: { err: GatewayError; status: string; code?: number }[] = [
  {
    err: clientError("'contents' must be an array", { param: "contents" }),
    status: "INVALID_ARGUMENT",
  },
  {
    err: new GatewayError("upstream rate limit: slow down", {
      code: "gw.upstream.rate_limited",
      source: "upstream",
      status: 429,
      retryAfterSecs: 3,
    }),
    status: "RESOURCE_EXHAUSTED",
  },
  // Gemini CLI retries a 499, even in a stream; a 400 it takes as final.
  { err: abortedByOperator(), status: "INVALID_ARGUMENT", code: 400 },
  {
    err: idleTimeout("gem", { secs: 30, midStream: false, timeoutStatus: 504 }).withTried([
      "gem",
      "claude",
    ]),
    status: "DEADLINE_EXCEEDED",
  },
];

for (const { err, status, code = err.status } of errorCases) {
  Deno.test(`gemini errors: ${err.status} → ${status}, whole and in-stream`, async () => {
    const body = geminiClient.renderError(err) as { error: Record<string, unknown> };
    assert.equal(body.error.code, code);
    assert.equal(body.error.status, status);
    assert.equal(body.error.message, err.publicMessage);
    const details = body.error.details as Record<string, unknown>[];
    assert.equal(details[0]?.reason, err.code);

    // Whole: the SDK raises ApiError carrying the status and our body.
    const { client: ai } = genaiAnswering(() => Response.json(body, { status: code }));
    const whole = await ai.models.generateContent({ model: "m", contents: "x" }).catch((e) => e);
    assert.ok(whole instanceof ApiError);
    assert.equal(whole.status, code);
    assert.match(whole.message, new RegExp(err.code.replaceAll(".", "\\.")));

    // In-stream (SSE): content first, then the error as the bare object and once more as a
    // `data:` event, each its own write as the gateway sends them: the SDK raises ApiError
    // with the status and our code from the bare object.
    const enc = geminiClient.streamEncoder({ id: "r", model: "m", sse: true });
    const again = enc.errorAgain?.(err);
    assert.ok(again);
    const writes = [enc.encode({ type: "text", text: "partial" })!, enc.error(err), again];
    assert.doesNotMatch(decoder.decode(writes[1]), /^data:/);
    assert.deepEqual(
      JSON.parse(decoder.decode(writes[2]).replace(/^data: /, "")),
      JSON.parse(decoder.decode(writes[1])),
    );
    const streamed = await drainSdkStream(() => new Response(chunkedBody(writes)));
    assert.deepEqual(streamed.seen, ["partial"]);
    assert.ok(streamed.thrown instanceof ApiError);
    assert.equal(streamed.thrown.status, code);
    assert.match(streamed.thrown.message, new RegExp(status));
    assert.match(streamed.thrown.message, new RegExp(err.code.replaceAll(".", "\\.")));

    // Glued to the chunk before it (a proxy that re-chunks), this SDK reads the `data:` event.
    const glued = await drainSdkStream(() => new Response(chunkedBody([concat(writes)])));
    assert.deepEqual(glued.seen, ["partial"]);
    assert.ok(glued.thrown instanceof ApiError);
    assert.equal(glued.thrown.status, code);

    // In-stream (JSON array): the error is the last element and the array closes.
    const arr = geminiClient.streamEncoder({ id: "r", model: "m", sse: false });
    const text = [arr.open(), arr.encode({ type: "text", text: "partial" }), arr.error(err)]
      .map((b) => (b ? decoder.decode(b) : "")).join("");
    const items = JSON.parse(text);
    assert.deepEqual(items.at(-1).error.status, status);
    assert.equal(items.at(-1).error.details[0].reason, err.code);
  });
}

Deno.test("gemini errors: a caller's error from a Gemini upstream keeps its status", () => {
  const err = geminiUpstream.decodeError(404, errorBody(404, "models/x is not found"));
  const body = geminiClient.renderError(err) as { error: Record<string, unknown> };
  assert.equal(body.error.code, 404);
  assert.equal(body.error.status, "NOT_FOUND");
});

// ---------------------------------------------------------------- helpers

/** A body that arrives as these network chunks, one read each. */
function chunkedBody(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** Reads a stream through the SDK: the texts it yielded and what it threw. */
async function drainSdkStream(reply: () => Response) {
  const { client: ai } = genaiAnswering(reply);
  const seen: (string | undefined)[] = [];
  const thrown: unknown = await (async () => {
    for await (const c of await ai.models.generateContentStream({ model: "m", contents: "x" })) {
      seen.push(c.text);
    }
  })().catch((e) => e);
  return { seen, thrown };
}

async function decodeFrames(chunks: (string | Uint8Array)[]): Promise<UpstreamFrame[]> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(typeof c === "string" ? encoder.encode(c) : c);
      controller.close();
    },
  });
  const frames: UpstreamFrame[] = [];
  for await (const frame of body.pipeThrough(geminiUpstream.decodeStream())) frames.push(frame);
  return frames;
}
