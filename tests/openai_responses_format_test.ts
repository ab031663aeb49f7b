import assert from "node:assert/strict";
import OpenAI from "openai";
import { encodeText, openaiAnswering, streamResponse } from "./format_kit.ts";
import type { Config, Upstream } from "../gateway/config/schema.ts";
import type { UpstreamFrame } from "../gateway/formats/format.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import type { IrEvent, IrRequest } from "../gateway/formats/ir.ts";
import { parseChatRequest } from "../gateway/formats/openai_chat/request.ts";
import { responsesClient, responsesUpstream } from "../gateway/formats/openai_responses/mod.ts";
import { responsesEventIsContent } from "../gateway/formats/openai_responses/pulse.ts";
import { responsesRequestBody } from "../gateway/formats/openai_responses/request.ts";
import { abortedByOperator, idleTimeout } from "../gateway/forward/stop_reasons.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import {
  errorBody,
  responsesFailedChunks,
  type ResponsesScript,
  responsesStreamChunks,
  responsesWholeBody,
} from "./fake_upstreams/openai_responses_script.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// --- pulse (docs/design.md "Pulse") ---------------------------------------------------------

const pulseTable: [string | undefined, boolean][] = [
  ["response.created", false],
  ["response.in_progress", false],
  ["response.queued", false],
  ["codex.rate_limits", false],
  ["codex.anything_new", false],
  ["keepalive", false],
  ["response.output_item.added", true],
  ["response.content_part.added", true],
  ["response.output_text.delta", true],
  ["response.output_text.done", true],
  ["response.reasoning_summary_text.delta", true],
  ["response.reasoning_text.delta", true],
  ["response.function_call_arguments.delta", true],
  ["response.refusal.delta", true],
  ["response.output_item.done", true],
  ["response.completed", true],
  ["response.incomplete", true],
  ["response.failed", true],
  ["error", true],
  ["response.some_future_event", true],
  [undefined, true],
];

for (const [type, content] of pulseTable) {
  Deno.test(`pulse: ${type ?? "(no type)"} is ${content ? "content" : "keep-alive"}`, () => {
    assert.equal(responsesEventIsContent(type), content);
  });
}

Deno.test("pulse: frames from a stream agree with the table, comments are keep-alives", async () => {
  const frames = await decode([
    ": keep-alive\n\n",
    ...responsesStreamChunks({ text: ["Hi"], usage: { input: 1, output: 1 } }),
  ]);
  const kinds = frames.map((f) => [typeOf(f), f.content]);
  assert.deepEqual(kinds.slice(0, 3), [
    [undefined, false],
    ["response.created", false],
    ["response.in_progress", false],
  ]);
  assert.ok(frames.slice(3).every((f) => f.content));
});

// --- request parse and upstream body -------------------------------------------

const clientBody = {
  model: "smart",
  instructions: "Be brief.",
  input: [
    { role: "developer", content: "Answer in English." },
    {
      type: "message",
      role: "user",
      content: [
        { type: "input_text", text: "What is in this picture, and the weather?" },
        { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=", detail: "low" },
        { type: "input_image", image_url: "https://example.com/cat.jpg" },
      ],
    },
    {
      type: "reasoning",
      id: "rs_1",
      summary: [{ type: "summary_text", text: "Look, then call the tool." }],
    },
    {
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: "A cat. Checking weather." }],
    },
    { type: "function_call", call_id: "call_1", name: "weather", arguments: '{"city":"Oslo"}' },
    { type: "function_call_output", call_id: "call_1", output: "rain" },
    { role: "user", content: "Thanks!" },
  ],
  tools: [{
    type: "function",
    name: "weather",
    description: "Current weather",
    parameters: { type: "object", properties: { city: { type: "string" } } },
    strict: true,
  }],
  tool_choice: { type: "function", name: "weather" },
  max_output_tokens: 300,
  temperature: 0.5,
  stream: true,
  user: "session-7",
};

Deno.test("parse: input items, system, tools, images and session hint become IR", () => {
  const ir = responsesClient.parseRequest(clientBody, {});
  assert.equal(ir.model, "smart");
  assert.equal(ir.system, "Be brief.\n\nAnswer in English.");
  assert.equal(ir.stream, true);
  assert.equal(ir.maxTokens, 300);
  assert.equal(ir.temperature, 0.5);
  assert.equal(ir.sessionHint, "session-7");
  assert.deepEqual(ir.toolChoice, { name: "weather" });
  assert.deepEqual(ir.tools, [{
    name: "weather",
    description: "Current weather",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  }]);
  assert.deepEqual(ir.messages, [
    {
      role: "user",
      content: [
        { type: "text", text: "What is in this picture, and the weather?" },
        { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
        { type: "image_url", url: "https://example.com/cat.jpg" },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "reasoning", text: "Look, then call the tool." },
        { type: "text", text: "A cat. Checking weather." },
        { type: "tool_call", id: "call_1", name: "weather", arguments: '{"city":"Oslo"}' },
      ],
    },
    { role: "user", content: [{ type: "tool_result", toolCallId: "call_1", content: "rain" }] },
    { role: "user", content: [{ type: "text", text: "Thanks!" }] },
  ]);
});

Deno.test("parse: a plain string input is one user turn; prompt_cache_key wins as session", () => {
  const ir = responsesClient.parseRequest(
    { model: "m", input: "hello", prompt_cache_key: "pck", user: "u" },
    {},
  );
  assert.deepEqual(ir.messages, [{ role: "user", content: [{ type: "text", text: "hello" }] }]);
  assert.equal(ir.sessionHint, "pck");
  assert.equal(ir.stream, false);
});

Deno.test("upstream body: IR round-trips into Responses input items", () => {
  const ir = responsesClient.parseRequest(clientBody, {});
  const body = responsesRequestBody(ir, "gpt-5");
  assert.deepEqual(body, {
    model: "gpt-5",
    store: false,
    instructions: "Be brief.\n\nAnswer in English.",
    input: [
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "What is in this picture, and the weather?" },
          { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=", detail: "auto" },
          { type: "input_image", image_url: "https://example.com/cat.jpg", detail: "auto" },
        ],
      },
      {
        type: "message",
        role: "assistant",
        content: [{ type: "output_text", text: "A cat. Checking weather." }],
      },
      { type: "function_call", call_id: "call_1", name: "weather", arguments: '{"city":"Oslo"}' },
      { type: "function_call_output", call_id: "call_1", output: "rain" },
      { type: "message", role: "user", content: [{ type: "input_text", text: "Thanks!" }] },
    ],
    tools: [{
      type: "function",
      name: "weather",
      description: "Current weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    }],
    tool_choice: { type: "function", name: "weather" },
    max_output_tokens: 300,
    temperature: 0.5,
    stream: true,
  });
});

Deno.test("upstream body: a Chat Completions request translates into Responses", () => {
  const ir = parseChatRequest({
    model: "smart",
    messages: [
      { role: "system", content: "sys" },
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "42" },
    ],
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
    tool_choice: "required",
    max_tokens: 10,
  });
  const body = responsesRequestBody(ir, "gpt-5");
  assert.equal(body.instructions, "sys");
  assert.deepEqual(body.input, [
    { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
    { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
    { type: "function_call_output", call_id: "c1", output: "42" },
  ]);
  assert.equal(body.tool_choice, "required");
  assert.equal(body.max_output_tokens, 10);
  assert.equal(body.stream, undefined);
});

Deno.test("upstream body: stop sequences are refused, not dropped", () => {
  const ir: IrRequest = { model: "m", messages: [], stream: false, stop: ["END"] };
  assert.deepEqual(responsesUpstream.unsupportedFor(ir), ["stop sequences"]);
  assert.deepEqual(responsesUpstream.unsupportedFor({ ...ir, stop: undefined }), []);
  assertUnsupported(() => responsesRequestBody(ir, "gpt-5"), "stop");
});

Deno.test("upstream body: parts a turn of that role cannot hold are named by unsupportedFor", () => {
  const ir: IrRequest = {
    model: "m",
    stream: false,
    messages: [
      { role: "user", content: [{ type: "refusal", text: "no" }] },
      { role: "assistant", content: [{ type: "image_url", url: "https://x/a.png" }] },
      { role: "assistant", content: [{ type: "reasoning", text: "hmm" }] },
    ],
  };
  assert.deepEqual(responsesUpstream.unsupportedFor(ir), [
    "part 'refusal' in a user turn",
    "part 'image_url' in an assistant turn",
  ]);
});

const nativeOnly: [string, Record<string, unknown>, string][] = [
  ["previous_response_id", { previous_response_id: "resp_1" }, "previous_response_id"],
  ["conversation", { conversation: "conv_1" }, "conversation"],
  ["built-in file_search tool", { tools: [{ type: "file_search" }] }, "tools[0].type"],
  ["server-run tool_search", { tools: [{ type: "tool_search" }] }, "tools[0].type"],
  ["hosted tool_choice", { tool_choice: { type: "file_search" } }, "tool_choice.type"],
  ["item_reference input", { input: [{ type: "item_reference", id: "msg_1" }] }, "input[0].type"],
  ["image by file id", {
    input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }],
  }, "input[0].content[0].image_url"],
  ["input_file", {
    input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }],
  }, "input[0].content[0].type"],
  ["web search call item", {
    input: [{ type: "web_search_call", id: "ws_1", status: "completed" }],
  }, "input[0].type"],
];

for (const [what, extra, param] of nativeOnly) {
  Deno.test(`parse: ${what} is recorded as native-only, not refused`, () => {
    const ir = responsesClient.parseRequest({ model: "m", input: "hi", ...extra }, {});
    assert.deepEqual(ir.nativeOnly?.map((f) => f.param), [param]);
  });
}

Deno.test("parse: background mode is refused: its answer is fetched later by id", () => {
  assertUnsupported(
    () => responsesClient.parseRequest({ model: "m", input: "hi", background: true }, {}),
    "background",
  );
});

Deno.test("parse: text.format is structured output, and goes back out as text.format", () => {
  const schema = { type: "object", properties: { a: { type: "string" } }, required: ["a"] };
  const format = { type: "json_schema", name: "thing", schema, strict: true, description: "d" };
  const ir = responsesClient.parseRequest({ model: "m", input: "hi", text: { format } }, {});
  assert.deepEqual(ir.responseFormat, format);
  assert.equal(ir.nativeOnly, undefined);
  assert.deepEqual(responsesRequestBody(ir, "gpt-5").text, { format });
  const json = responsesClient.parseRequest(
    { model: "m", input: "hi", text: { format: { type: "json_object" } } },
    {},
  );
  assert.deepEqual(responsesRequestBody(json, "gpt-5").text, { format: { type: "json_object" } });
  const plain = responsesClient.parseRequest(
    { model: "m", input: "hi", text: { format: { type: "text" }, verbosity: "low" } },
    {},
  );
  assert.equal(plain.responseFormat, undefined);
  assert.equal(responsesRequestBody(plain, "gpt-5").text, undefined);
});

Deno.test("upstream body: a Chat response_format becomes text.format", () => {
  const schema = { type: "object", properties: {} };
  const ir = parseChatRequest({
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: false } },
  });
  assert.deepEqual(responsesRequestBody(ir, "gpt-5").text, {
    format: { type: "json_schema", name: "x", schema, strict: false },
  });
});

Deno.test("parse: a malformed text.format is refused", () => {
  assert.throws(
    () =>
      responsesClient.parseRequest(
        { model: "m", input: "x", text: { format: { type: "json_schema", schema: {} } } },
        {},
      ),
    (e: unknown) => e instanceof GatewayError && e.param === "text.format.name" && e.status === 400,
  );
});

Deno.test("parse: wrong types name the field", () => {
  assert.throws(
    () => responsesClient.parseRequest({ model: "m", input: 5 }, {}),
    (e: unknown) => e instanceof GatewayError && e.param === "input" && e.status === 400,
  );
  assert.throws(
    () => responsesClient.parseRequest({ model: "m", input: "x", max_output_tokens: "9" }, {}),
    (e: unknown) => e instanceof GatewayError && e.param === "max_output_tokens",
  );
});

Deno.test("buildRequest: translated body, /responses URL and Bearer key", async () => {
  const ir = responsesClient.parseRequest({ model: "smart", input: "hi" }, {});
  const req = await responsesUpstream.buildRequest(call({ ir }));
  assert.equal(req.url, "http://127.0.0.1:9/v1/responses");
  assert.equal(req.headers.get("authorization"), "Bearer sk-test");
  const body = await req.json();
  assert.equal(body.model, "gpt-5");
  assert.deepEqual(body.input, [
    { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
  ]);
});

Deno.test("buildRequest: same-format pass-through changes only the model", async () => {
  const passthrough = { model: "smart", input: "hi", reasoning: { effort: "high" }, store: true };
  const ir = responsesClient.parseRequest(passthrough, {});
  const req = await responsesUpstream.buildRequest(call({ ir, passthrough }));
  assert.deepEqual(await req.json(), { ...passthrough, model: "gpt-5" });
});

// --- upstream stream and whole decode ------------------------------------------

const toolScript: ResponsesScript = {
  reasoning: ["Need ", "weather."],
  text: ["Let me ", "check."],
  toolCall: { id: "call_abc", name: "weather", argsPieces: ['{"ci', 'ty":"Oslo"}'] },
  usage: { input: 120, output: 40, cached: 100, reasoning: 12 },
};

Deno.test("decodeStream: a recorded stream becomes IR events", async () => {
  const frames = await decode(responsesStreamChunks(toolScript, { pingFirst: 3 }));
  assert.deepEqual(frames.slice(0, 4).map((f) => f.content), [false, false, false, false]);
  const events = frames.flatMap((f) => f.events);
  const usage = {
    inputTokens: 120,
    outputTokens: 40,
    cachedTokens: 100,
    reasoningTokens: 12,
    cacheWriteTokens: 0,
  };
  assert.deepEqual(events, [
    {
      type: "start",
      id: "resp_68af00000000000000000000000000000000000000000000",
      model: "gpt-5-2025-08-07",
    },
    { type: "reasoning", text: "Need " },
    { type: "reasoning", text: "weather." },
    { type: "text", text: "Let me " },
    { type: "text", text: "check." },
    { type: "tool_call_start", index: 0, id: "call_abc", name: "weather" },
    { type: "tool_call_args", index: 0, args: '{"ci' },
    { type: "tool_call_args", index: 0, args: 'ty":"Oslo"}' },
    { type: "finish", reason: "tool_calls" },
    { type: "usage", usage },
  ]);
  assert.deepEqual(frames.at(-1)?.usage, usage);
  // The raw bytes are kept for pass-through.
  assert.equal(
    frames.map((f) => decoder.decode(f.raw)).join(""),
    responsesStreamChunks(toolScript, { pingFirst: 3 }).join(""),
  );
});

Deno.test("decodeStream: items sent whole (no deltas) still yield text and arguments", async () => {
  const item = {
    type: "function_call",
    id: "fc_1",
    call_id: "c9",
    name: "f",
    arguments: '{"a":1}',
  };
  const message = {
    type: "message",
    id: "m",
    role: "assistant",
    content: [{ type: "output_text", text: "hey" }],
  };
  const frames = await decode([
    sse("response.output_item.done", { output_index: 0, item: message }),
    sse("response.output_item.done", { output_index: 1, item }),
  ]);
  assert.deepEqual(frames.flatMap((f) => f.events), [
    { type: "text", text: "hey" },
    { type: "tool_call_start", index: 0, id: "c9", name: "f" },
    { type: "tool_call_args", index: 0, args: '{"a":1}' },
  ]);
});

Deno.test("decodeStream: incomplete maps to length; response.failed and error are errors", async () => {
  const incomplete = await decode(
    responsesStreamChunks({ text: ["a"], usage: { input: 1, output: 1 }, finish: "length" }),
  );
  assert.ok(
    incomplete.flatMap((f) => f.events).some((e) => e.type === "finish" && e.reason === "length"),
  );
  const failed = await decode(
    responsesFailedChunks({ text: [], usage: { input: 0, output: 0 } }, "boom"),
  );
  const err = failed.at(-1)?.error;
  assert.ok(err);
  assert.equal(err.code, "gw.upstream.error");
  assert.match(err.message, /boom/);
  assert.equal(failed.at(-1)?.content, true);
  const limited = await decode([
    sse("error", { code: "rate_limit_exceeded", message: "slow down", param: null }),
  ]);
  assert.equal(limited[0]?.error?.code, "gw.upstream.rate_limited");
});

Deno.test("decodeWhole: output items, finish and usage", () => {
  const ir = responsesUpstream.decodeWhole(responsesWholeBody(toolScript));
  assert.equal(ir.model, "gpt-5-2025-08-07");
  assert.equal(ir.finish, "tool_calls");
  assert.deepEqual(ir.content, [
    { type: "reasoning", text: "Need weather." },
    { type: "text", text: "Let me check." },
    { type: "tool_call", id: "call_abc", name: "weather", arguments: '{"city":"Oslo"}' },
  ]);
  assert.deepEqual(ir.usage, {
    inputTokens: 120,
    outputTokens: 40,
    cachedTokens: 100,
    reasoningTokens: 12,
    cacheWriteTokens: 0,
  });
  const cut = responsesUpstream.decodeWhole(
    responsesWholeBody({ text: ["x"], usage: { input: 1, output: 1 }, finish: "content_filter" }),
  );
  assert.equal(cut.finish, "content_filter");
  assert.throws(
    () => responsesUpstream.decodeWhole("<html>"),
    (e: unknown) => e instanceof GatewayError && e.code === "gw.upstream.bad_response",
  );
});

Deno.test("decodeError: OpenAI error bodies classify by status", () => {
  assert.equal(
    responsesUpstream.decodeError(429, errorBody(429, "slow")).code,
    "gw.upstream.rate_limited",
  );
  assert.equal(
    responsesUpstream.decodeError(401, errorBody(401, "bad key")).code,
    "gw.upstream.credentials",
  );
  const rejected = responsesUpstream.decodeError(400, errorBody(400, "bad input"));
  assert.equal(rejected.code, "gw.upstream.rejected");
  assert.equal(rejected.publicMessage, "bad input");
});

// --- client stream encode, read back by the official SDK -----------------------

const toolEvents: IrEvent[] = [
  { type: "start", id: "up-1", model: "claude" },
  { type: "reasoning", text: "Think" },
  { type: "reasoning", text: "ing." },
  { type: "text", text: "Hello" },
  { type: "text", text: ", world" },
  { type: "tool_call_start", index: 0, id: "call_1", name: "weather" },
  { type: "tool_call_args", index: 0, args: '{"city":' },
  { type: "tool_call_args", index: 0, args: '"Oslo"}' },
  { type: "tool_call_start", index: 1, id: "call_2", name: "time" },
  { type: "tool_call_args", index: 1, args: "{}" },
  { type: "finish", reason: "tool_calls" },
  {
    type: "usage",
    usage: { inputTokens: 10, outputTokens: 5, cachedTokens: 3, reasoningTokens: 2 },
  },
];

Deno.test("stream encode: a full, numbered event sequence", () => {
  const events = parseSse(encodeAll(toolEvents));
  assert.deepEqual(events.map((e) => e.data.sequence_number), events.map((_, i) => i));
  assert.ok(events.every((e) => e.event === e.data.type));
  assert.deepEqual(events.map((e) => e.event), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.delta",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  const completed = events.at(-1)?.data.response as Record<string, unknown>;
  assert.equal(completed.id, "resp_req-1");
  assert.equal(completed.model, "smart");
  assert.deepEqual(completed.usage, {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 3, cache_write_tokens: 0 },
    output_tokens: 5,
    output_tokens_details: { reasoning_tokens: 2 },
    total_tokens: 15,
  });
});

Deno.test("SDK: responses.stream() accumulates our stream into a final response", async () => {
  const client = sdkClient(() => streamResponse([encodeAll(toolEvents)]));
  const stream = client.responses.stream({ model: "smart", input: "hi" });
  const deltas: string[] = [];
  stream.on("response.output_text.delta", (e) => deltas.push(e.delta));
  const final = await stream.finalResponse();
  assert.deepEqual(deltas, ["Hello", ", world"]);
  assert.equal(final.status, "completed");
  assert.equal(final.output_text, "Hello, world");
  const calls = final.output.filter((o) => o.type === "function_call");
  assert.deepEqual(calls.map((c) => [c.call_id, c.name, c.arguments]), [
    ["call_1", "weather", '{"city":"Oslo"}'],
    ["call_2", "time", "{}"],
  ]);
  const reasoning = final.output.find((o) => o.type === "reasoning");
  assert.deepEqual(reasoning?.type === "reasoning" ? reasoning.summary : null, [
    { type: "summary_text", text: "Thinking." },
  ]);
  assert.equal(final.usage?.input_tokens_details.cached_tokens, 3);
  assert.equal(final.usage?.output_tokens_details.reasoning_tokens, 2);
});

Deno.test("SDK: create({stream:true}) iterates our events in order", async () => {
  const client = sdkClient(() => streamResponse([encodeAll(toolEvents)]));
  const stream = await client.responses.create({ model: "smart", input: "hi", stream: true });
  const types: string[] = [];
  for await (const event of stream) types.push(event.type);
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.equal(types.length, 26);
});

Deno.test("SDK: refusal and a length stop parse as an incomplete response", async () => {
  const events: IrEvent[] = [
    { type: "text", text: "Partial" },
    { type: "refusal", text: "I can't" },
    { type: "finish", reason: "length" },
  ];
  const bytes = encodeAll(events);
  assert.equal(parseSse(bytes).at(-1)?.event, "response.incomplete");
  const final = await sdkClient(() => streamResponse([bytes])).responses
    .stream({ model: "smart", input: "hi" }).finalResponse();
  assert.equal(final.status, "incomplete");
  assert.equal(final.incomplete_details?.reason, "max_output_tokens");
  const message = final.output[0];
  assert.deepEqual(message?.type === "message" ? message.content.map((c) => c.type) : [], [
    "output_text",
    "refusal",
  ]);
});

Deno.test("stream encode: pass-through (nothing encoded) closes with nothing", () => {
  const writer = responsesClient.streamEncoder({ id: "req-1", model: "smart" });
  assert.equal(writer.open(), null);
  assert.equal(writer.close(), null);
});

Deno.test("SDK: our encoder reads a translated fake upstream end to end", async () => {
  const frames = await decode(responsesStreamChunks(toolScript, { pingFirst: 2 }));
  const writer = responsesClient.streamEncoder({ id: "req-2", model: "smart" });
  const parts = frames.flatMap((f) => f.events).map((e) => writer.encode(e));
  const bytes = concat([...parts, writer.close()]);
  const final = await sdkClient(() => streamResponse([bytes])).responses
    .stream({ model: "smart", input: "hi" }).finalResponse();
  assert.equal(final.output_text, "Let me check.");
  assert.equal(final.usage?.total_tokens, 160);
});

Deno.test("SDK: the fake upstream's own stream and body parse (pass-through bytes)", async () => {
  const chunks = responsesStreamChunks(toolScript, { pingFirst: 2 });
  const streamed = await sdkClient(() => streamResponse(chunks)).responses
    .stream({ model: "smart", input: "hi" }).finalResponse();
  assert.equal(streamed.output_text, "Let me check.");
  assert.equal(streamed.usage?.input_tokens_details.cached_tokens, 100);
  const whole = await sdkClient(() =>
    new Response(responsesWholeBody(toolScript), {
      headers: { "content-type": "application/json" },
    })
  ).responses.create({ model: "smart", input: "hi" });
  assert.equal(whole.output_text, "Let me check.");
});

Deno.test("SDK: a failure after passed-through bytes raises an APIError with the code", async () => {
  const err = idleTimeout("oai", { secs: 30, midStream: true, timeoutStatus: 504 });
  const upstreamBytes = responsesStreamChunks(toolScript).slice(0, 8).join("");
  const writer = responsesClient.streamEncoder({ id: "req-5", model: "smart" });
  const bytes = concat([encoder.encode(upstreamBytes), writer.error(err)]);
  const thrown = await sdkClient(() => streamResponse([bytes])).responses
    .stream({ model: "smart", input: "hi" }).finalResponse().then(() => null, (e: unknown) => e);
  assert.ok(thrown instanceof OpenAI.APIError);
  assert.equal(thrown.code, "gw.upstream.idle_timeout_mid_stream");
});

// --- errors ------------------------------------------------------------------

const errorCases: [string, GatewayError, string][] = [
  ["400", upstreamStatusError(400, { body: errorBody(400, "bad input") }), "invalid_request_error"],
  ["429", upstreamStatusError(429, { body: errorBody(429, "slow") }), "rate_limit_error"],
  [
    "504",
    idleTimeout("claude", { secs: 30, midStream: false, timeoutStatus: 504 }),
    "timeout_error",
  ],
];

for (const [status, err, type] of errorCases) {
  Deno.test(`errors: whole ${status} is an OpenAI error object with the gateway code`, async () => {
    const body = responsesClient.renderError(err) as { error: Record<string, unknown> };
    assert.equal(err.status, Number(status));
    assert.deepEqual(body, {
      error: { message: err.publicMessage, type, param: null, code: err.code },
    });
    const client = sdkClient(() =>
      new Response(JSON.stringify(body), {
        status: err.status,
        headers: { "content-type": "application/json" },
      })
    );
    const thrown = await client.responses.create({ model: "smart", input: "hi" }).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(thrown instanceof OpenAI.APIError);
    assert.equal(thrown.status, err.status);
    assert.equal(thrown.code, err.code);
  });

  Deno.test(`errors: in-stream ${status} ends a started stream with response.failed`, async () => {
    const writer = responsesClient.streamEncoder({ id: "req-3", model: "smart" });
    const bytes = concat([writer.encode({ type: "text", text: "Hel" }), writer.error(err)]);
    const last = parseSse(bytes).at(-1);
    assert.equal(last?.event, "response.failed");
    const response = last?.data.response as Record<string, unknown>;
    assert.deepEqual(response.error, { code: err.code, message: err.publicMessage });
    const final = await sdkClient(() => streamResponse([bytes])).responses
      .stream({ model: "smart", input: "hi" }).finalResponse();
    assert.equal(final.status, "failed");
    assert.equal(final.error?.code, err.code);
    assert.equal(final.output_text, "Hel");
  });
}

Deno.test("errors: in-stream before anything was encoded sends error, then response.failed", async () => {
  const err = idleTimeout("claude", { secs: 30, midStream: true, timeoutStatus: 504 });
  const writer = responsesClient.streamEncoder({ id: "req-4", model: "smart" });
  const bytes = writer.error(err);
  const events = parseSse(bytes);
  assert.deepEqual(events.map((e) => e.event), ["error", "response.failed"]);
  assert.equal(events[0]?.data.code, "gw.upstream.idle_timeout_mid_stream");
  const response = events[1]?.data.response as Record<string, unknown>;
  assert.deepEqual(response.error, { code: err.code, message: err.publicMessage });
  const thrown = await sdkClient(() => streamResponse([bytes])).responses
    .stream({ model: "smart", input: "hi" }).finalResponse().then(() => null, (e: unknown) => e);
  assert.ok(thrown instanceof OpenAI.APIError);
  assert.equal(thrown.code, "gw.upstream.idle_timeout_mid_stream");
});

Deno.test("errors: an operator's stop is invalid_request_error, and invalid_prompt in a stream", async () => {
  // Codex re-sends a turn after any response.failed code but a provider's few it takes as final.
  const err = abortedByOperator();
  assert.deepEqual(responsesClient.renderError(err), {
    error: {
      message: err.publicMessage,
      type: "invalid_request_error",
      param: null,
      code: err.code,
    },
  });
  const writer = responsesClient.streamEncoder({ id: "req-5", model: "smart" });
  const bytes = concat([writer.encode({ type: "text", text: "Hel" }), writer.error(err)]);
  const last = parseSse(bytes).at(-1);
  assert.equal(last?.event, "response.failed");
  assert.deepEqual((last?.data.response as Record<string, unknown>).error, {
    code: "invalid_prompt",
    message: "request aborted by an operator",
    gateway_code: "gw.request.aborted",
  });
  const final = await sdkClient(() => streamResponse([bytes])).responses
    .stream({ model: "smart", input: "hi" }).finalResponse();
  assert.equal(final.status, "failed");
  assert.equal(final.error?.code, "invalid_prompt");
  assert.equal(final.output_text, "Hel");
  const early = parseSse(
    responsesClient.streamEncoder({ id: "req-6", model: "smart" }).error(err),
  );
  assert.deepEqual(early.map((e) => [e.event, e.data.code]), [["error", "invalid_prompt"], [
    "response.failed",
    undefined,
  ]]);
});

// --- whole encode, read back by the official SDK -------------------------------

Deno.test("SDK: responses.create() parses our whole body with output_text", async () => {
  const body = responsesClient.encodeWhole({
    id: "chatcmpl-9",
    model: "smart",
    content: [
      { type: "reasoning", text: "hmm" },
      { type: "text", text: "Hello" },
      { type: "text", text: " there" },
      { type: "tool_call", id: "call_1", name: "f", arguments: "{}" },
    ],
    finish: "tool_calls",
    usage: { inputTokens: 4, outputTokens: 2, cachedTokens: 1 },
  });
  const client = sdkClient(() =>
    new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } })
  );
  const res = await client.responses.create({ model: "smart", input: "hi" });
  assert.equal(res.id, "resp_chatcmpl-9");
  assert.equal(res.status, "completed");
  assert.equal(res.output_text, "Hello there");
  assert.deepEqual(res.output.map((o) => o.type), ["reasoning", "message", "function_call"]);
  assert.equal(res.usage?.input_tokens_details.cached_tokens, 1);
  assert.equal(res.usage?.total_tokens, 6);
});

// --- helpers -----------------------------------------------------------------

function assertUnsupported(fn: () => unknown, param: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.code, "gw.client.unsupported");
    assert.equal(e.status, 400);
    assert.equal(e.param, param);
    return true;
  });
}

function call(opts: { ir: IrRequest; passthrough?: Record<string, unknown> }) {
  const upstream = {
    id: "oai",
    kind: "openai-responses",
    base_url: "http://127.0.0.1:9/v1/",
    api_key_env: "OAI_KEY",
  } as Upstream;
  return {
    ir: opts.ir,
    passthrough: opts.passthrough,
    upstream,
    model: "gpt-5",
    env: (name: string) => (name === "OAI_KEY" ? "sk-test" : undefined),
    config: {} as Config,
  };
}

async function decode(chunks: (Uint8Array | string)[]): Promise<UpstreamFrame[]> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(typeof c === "string" ? encoder.encode(c) : c);
      controller.close();
    },
  });
  return await Array.fromAsync(body.pipeThrough(responsesUpstream.decodeStream()));
}

function typeOf(frame: UpstreamFrame): string | undefined {
  const match = /^event: (.*)$/m.exec(decoder.decode(frame.raw));
  return match?.[1];
}

function sse(type: string, fields: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
}

function concat(parts: (Uint8Array | null)[]): Uint8Array {
  return encoder.encode(parts.map((p) => (p ? decoder.decode(p) : "")).join(""));
}

const sdkClient = (reply: () => Response) => openaiAnswering(reply).client;
const encodeAll = (events: IrEvent[]) => encoder.encode(encodeText(responsesClient, events));

function parseSse(bytes: Uint8Array): { event?: string; data: Record<string, unknown> }[] {
  return decoder.decode(bytes).split("\n\n").filter((b) => b.trim()).map((block) => {
    const event = /^event: (.*)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1] ?? "{}";
    return { event, data: JSON.parse(data) };
  });
}
