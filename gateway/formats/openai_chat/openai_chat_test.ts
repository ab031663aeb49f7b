/**
 * The Chat Completions request codec: what the IR carries (structured
 * output), what it records as Chat-only, and what a Chat body cannot say.
 */
import assert from "node:assert/strict";
import { GatewayError } from "../../runtime/gateway_error.ts";
import type { IrRequest } from "../ir.ts";
import { parseAnthropicRequest } from "../anthropic/request.ts";
import { chatUpstream } from "./mod.ts";
import { chatRequestBody, parseChatRequest } from "./request.ts";
import { parseResponsesRequest } from "../openai_responses/request.ts";

const base = { model: "smart", messages: [{ role: "user", content: "hi" }] };
const schema = { type: "object", properties: { a: { type: "string" } }, required: ["a"] };

Deno.test("chat request: response_format is read into the IR", () => {
  const parse = (response_format: unknown) =>
    parseChatRequest({ ...base, response_format }).responseFormat;
  assert.equal(parse(undefined), undefined);
  assert.equal(parse({ type: "text" }), undefined);
  assert.deepEqual(parse({ type: "json_object" }), { type: "json_object" });
  assert.deepEqual(
    parse({
      type: "json_schema",
      json_schema: { name: "thing", description: "d", schema, strict: true },
    }),
    { type: "json_schema", name: "thing", description: "d", schema, strict: true },
  );
});

Deno.test("chat request: a malformed response_format is a 400 naming the field", () => {
  const cases: [unknown, string][] = [
    ["json", "response_format"],
    [{ type: "yaml" }, "response_format.type"],
    [{ type: "json_schema" }, "response_format.json_schema"],
    [{ type: "json_schema", json_schema: { schema } }, "response_format.json_schema.name"],
    [
      { type: "json_schema", json_schema: { name: "x", schema: [] } },
      "response_format.json_schema.schema",
    ],
  ];
  for (const [response_format, param] of cases) {
    assert.throws(
      () => parseChatRequest({ ...base, response_format }),
      (err: unknown) => err instanceof GatewayError && err.param === param && err.status === 400,
      param,
    );
  }
});

Deno.test("chat request: structured output from other formats becomes response_format", () => {
  const responses = parseResponsesRequest({
    model: "m",
    input: "hi",
    text: { format: { type: "json_schema", name: "thing", schema, strict: true } },
  });
  assert.deepEqual(chatRequestBody(responses, "gpt").response_format, {
    type: "json_schema",
    json_schema: { name: "thing", schema, strict: true },
  });
  const anthropic = parseAnthropicRequest({
    model: "m",
    max_tokens: 5,
    messages: [{ role: "user", content: "hi" }],
    output_config: { format: { type: "json_schema", schema } },
  });
  assert.deepEqual(chatRequestBody(anthropic, "gpt").response_format, {
    type: "json_schema",
    json_schema: { name: "response", schema },
  });
  const plain = chatRequestBody(parseChatRequest(base), "gpt");
  assert.equal(plain.response_format, undefined);
});

const nativeOnly: [string, Record<string, unknown>, string][] = [
  ["an audio input part", {
    messages: [{
      role: "user",
      content: [
        { type: "text", text: "transcribe" },
        { type: "input_audio", input_audio: { data: "UklGR", format: "wav" } },
      ],
    }],
  }, "messages[0].content[1].type"],
  ["a file part", {
    messages: [{ role: "user", content: [{ type: "file", file: { file_id: "file_1" } }] }],
  }, "messages[0].content[0].type"],
  ["a custom tool", { tools: [{ type: "custom", custom: { name: "x" } }] }, "tools[0].type"],
  ["an allowed_tools choice", {
    tool_choice: { type: "allowed_tools", allowed_tools: { mode: "auto", tools: [] } },
  }, "tool_choice.type"],
  ["several choices", { n: 2 }, "n"],
  ["audio output", { modalities: ["text", "audio"], audio: { voice: "alloy" } }, "modalities"],
  ["log probabilities", { logprobs: true, top_logprobs: 2 }, "logprobs"],
  ["web search", { web_search_options: {} }, "web_search_options"],
];

for (const [what, extra, param] of nativeOnly) {
  Deno.test(`chat request: ${what} is recorded as native-only, not refused`, () => {
    const ir = parseChatRequest({ ...base, ...extra });
    assert.deepEqual(ir.nativeOnly?.map((f) => f.param), [param]);
  });
}

Deno.test("chat request: tuning hints and n = 1 are not native-only", () => {
  const ir = parseChatRequest({
    ...base,
    n: 1,
    seed: 7,
    logprobs: false,
    presence_penalty: 0.1,
    reasoning_effort: "low",
    parallel_tool_calls: false,
    modalities: ["text"],
  });
  assert.equal(ir.nativeOnly, undefined);
});

Deno.test("chat request: a system message that is not text is still a 400", () => {
  assert.throws(
    () =>
      parseChatRequest({
        model: "m",
        messages: [{ role: "system", content: [{ type: "input_audio", input_audio: {} }] }],
      }),
    (err: unknown) => err instanceof GatewayError && err.status === 400,
  );
});

Deno.test("chat upstream: a user turn can hold only text and images", () => {
  const ir: IrRequest = {
    model: "m",
    stream: false,
    messages: [{ role: "user", content: [{ type: "reasoning", text: "hmm" }] }],
  };
  assert.deepEqual(chatUpstream.unsupportedFor(ir), ["part 'reasoning' in a user turn"]);
  assert.throws(
    () => chatRequestBody(ir, "gpt"),
    (err: unknown) => err instanceof GatewayError && err.code === "gw.client.unsupported",
  );
  assert.deepEqual(chatUpstream.unsupportedFor(parseChatRequest(base)), []);
});

Deno.test("stream: a plain text delta is read from its text alone, and means what parsing it means", () => {
  const decoder = chatUpstream.frameDecoder!();
  const enc = new TextEncoder();
  const blocks = [
    // Plain text deltas: taken without parsing.
    'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}\n\n',
    'data: {"choices":[{"delta":{"role":"assistant","content":"lo"},"finish_reason":null}],"usage":null}\n\n',
    // Each of these needs parsing: empty content, a finish, usage, an error, a tool call, spaces.
    'data: {"choices":[{"delta":{"content":""},"finish_reason":null}]}\n\n',
    'data: {"choices":[{"delta":{"content":"!"},"finish_reason":"stop"}]}\n\n',
    'data: {"choices":[{"delta":{"content":"!"},"finish_reason": "stop"}]}\n\n',
    'data: {"choices":[{"delta":{"content":"!"},"finish_reason":null}],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n',
    'data: {"choices":[{"delta":{"content":"!"},"finish_reason":null}],"error":{"message":"x"}}\n\n',
    'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"content\\":\\"x\\"}"}}]},"finish_reason":null}]}\n\n',
    // Cut short: not JSON, so the quick read must not take it.
    'data: {"choices":[{"delta":{"content":"x"},"finish_reason":null}]\n\n',
    // More than content in the delta: parsed.
    'data: {"choices":[{"delta":{"content":"x","refusal":"no"},"finish_reason":null}]}\n\n',
    // Escapes: the text is counted as decoded.
    'data: {"choices":[{"delta":{"content":"a\\"b\\u00e9\\n"},"finish_reason":null}]}\n\n',
  ];
  const frames = decoder.push(enc.encode(blocks.join("")));
  assert.equal(frames.length, blocks.length);
  // A quick read is a frame of its own class; a parsed one is a plain object.
  const quick = frames.map((f) => f.constructor.name !== "Object");
  assert.deepEqual(quick, [
    true,
    true,
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    true,
  ]);
  // The characters a usage ledger counts, known without building the events.
  assert.deepEqual([frames[0]!.chars, frames[1]!.chars, frames[10]!.chars], [3, 2, 5]);
  assert.deepEqual(frames[10]!.events, [{ type: "text", text: 'a"b\u00e9\n' }]);
  assert.deepEqual(frames[9]!.events.map((e) => e.type), ["text", "refusal"]);
  assert.deepEqual(frames[0]!.events, [{ type: "text", text: "Hel" }]);
  assert.deepEqual(frames[1]!.events, [{ type: "text", text: "lo" }]);
  assert.equal(frames[0]!.content, true);
  assert.equal(frames[0]!.usage, undefined);
  assert.equal(frames[0]!.error, undefined);
  assert.deepEqual(frames[3]!.events.map((e) => e.type), ["text", "finish"]);
  assert.deepEqual(frames[4]!.events.map((e) => e.type), ["text", "finish"]);
  assert.equal(frames[5]!.usage?.inputTokens, 3);
  assert.equal(frames[6]!.error?.source, "upstream");
  assert.equal(frames[8]!.error?.code, "gw.upstream.bad_response");
  assert.equal(new TextDecoder().decode(frames[0]!.raw), blocks[0]);
});
