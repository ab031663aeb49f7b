import assert from "node:assert/strict";
import { bedrockStreamException, decodeBedrockError } from "./errors.ts";
import { bedrockUpstream } from "./mod.ts";
import { converseRequestBody, converseUrl } from "./request.ts";
import { signedPost } from "./sign.ts";
import { eventStreamCodec } from "./stream.ts";
import { type BedrockUpstream, type Config, ConfigSchema } from "../../config/schema.ts";
import type { UpstreamCall, UpstreamFrame } from "../format.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";
import type { IrEvent, IrFinishReason, IrRequest } from "../ir.ts";
import {
  bedrockEvent,
  bedrockException,
  type BedrockScript,
  bedrockStreamChunks,
  bedrockWholeBody,
  errorBody,
  errorHeaders,
  verifySigV4,
} from "../../../tests/fake_upstreams/bedrock_script.ts";

const creds = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  region: "us-east-1",
};
const env: Record<string, string> = {
  AWS_ACCESS_KEY_ID: creds.accessKeyId,
  AWS_SECRET_ACCESS_KEY: creds.secretAccessKey,
};
const MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0";

function bedrockConfig(baseUrl?: string): { config: Config; upstream: BedrockUpstream } {
  const config = ConfigSchema.parse({
    upstreams: [{
      id: "bedrock",
      kind: "bedrock",
      region: "us-east-1",
      access_key_env: "AWS_ACCESS_KEY_ID",
      secret_key_env: "AWS_SECRET_ACCESS_KEY",
      ...(baseUrl ? { base_url: baseUrl } : {}),
    }],
    routes: [{ model: "smart", candidates: [{ upstream: "bedrock", model: MODEL }] }],
  });
  const upstream = config.upstreams[0];
  assert.equal(upstream?.kind, "bedrock");
  return { config, upstream };
}

function call(ir: IrRequest, opts: { baseUrl?: string; env?: Record<string, string> } = {}) {
  const { config, upstream } = bedrockConfig(opts.baseUrl);
  const vars = opts.env ?? env;
  return { ir, upstream, model: MODEL, env: (name) => vars[name], config } satisfies UpstreamCall;
}

const hello: IrRequest = {
  model: "smart",
  messages: [{ role: "user", content: [{ type: "text", text: "Hello" }] }],
  stream: true,
};

async function decode(chunks: Uint8Array[]): Promise<UpstreamFrame[]> {
  return await Array.fromAsync(
    ReadableStream.from(chunks).pipeThrough(bedrockUpstream.decodeStream()),
  );
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

const weatherScript: BedrockScript = {
  text: ["Let me ", "check."],
  toolCall: {
    id: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
    name: "get_weather",
    argsPieces: ['{"city":', ' "Paris"}'],
  },
  usage: { input: 20, output: 9, cacheRead: 100 },
};

// --- pulse (docs/design.md "Pulse") ---------------------------------------------------------

const pulseTable: { name: string; message: Uint8Array; content: boolean }[] = [
  {
    name: "messageStart",
    message: bedrockEvent("messageStart", { role: "assistant" }),
    content: false,
  },
  {
    name: "contentBlockStart toolUse",
    message: bedrockEvent("contentBlockStart", {
      contentBlockIndex: 1,
      start: { toolUse: { toolUseId: "t1", name: "f" } },
    }),
    content: true,
  },
  {
    name: "contentBlockDelta text",
    message: bedrockEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Hi" } }),
    content: true,
  },
  {
    name: "contentBlockDelta reasoningContent",
    message: bedrockEvent("contentBlockDelta", {
      contentBlockIndex: 0,
      delta: { reasoningContent: { text: "Hmm" } },
    }),
    content: true,
  },
  {
    name: "contentBlockDelta toolUse input",
    message: bedrockEvent("contentBlockDelta", {
      contentBlockIndex: 1,
      delta: { toolUse: { input: '{"a"' } },
    }),
    content: true,
  },
  {
    name: "contentBlockStop",
    message: bedrockEvent("contentBlockStop", { contentBlockIndex: 0 }),
    content: true,
  },
  {
    name: "messageStop",
    message: bedrockEvent("messageStop", { stopReason: "end_turn" }),
    content: true,
  },
  {
    name: "metadata usage",
    message: bedrockEvent("metadata", {
      usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 },
    }),
    content: true,
  },
  {
    name: "exception",
    message: bedrockException("throttlingException", "slow down"),
    content: true,
  },
  { name: "unknown event", message: bedrockEvent("somethingNew", { x: 1 }), content: true },
];

for (const row of pulseTable) {
  Deno.test(`bedrock pulse: ${row.name} is ${row.content ? "content" : "keep-alive"}`, async () => {
    const frames = await decode([row.message]);
    assert.equal(frames.length, 1);
    assert.equal(frames[0]?.content, row.content);
    assert.deepEqual(frames[0]?.raw, row.message);
  });
}

// --- request translation -----------------------------------------------------

Deno.test("bedrock request: system, images, reasoning, tool calls and results, config", () => {
  const ir: IrRequest = {
    model: "smart",
    system: "Be brief.",
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: "What is in this picture, and the weather in Paris?" },
          { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "Need the weather tool.", signature: "sig-abc" },
          { type: "text", text: "A cat. Checking the weather." },
          {
            type: "tool_call",
            id: "tooluse_1",
            name: "get_weather",
            arguments: '{"city":"Paris"}',
          },
          { type: "tool_call", id: "tooluse_2", name: "get_time", arguments: "" },
        ],
      },
      {
        role: "user",
        content: [{ type: "tool_result", toolCallId: "tooluse_1", content: '{"temp":21}' }],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", toolCallId: "tooluse_2", content: "clock broken", isError: true },
          { type: "text", text: "And tomorrow?" },
        ],
      },
    ],
    tools: [
      {
        name: "get_weather",
        description: "Current weather",
        parameters: {
          type: "object",
          properties: { city: { type: "string" } },
          required: ["city"],
        },
      },
      { name: "get_time", parameters: { type: "object", properties: {} } },
    ],
    toolChoice: "auto",
    maxTokens: 512,
    temperature: 0.2,
    topP: 0.9,
    stop: ["END"],
    stream: false,
  };
  assert.deepEqual(converseRequestBody(ir), {
    messages: [
      {
        role: "user",
        content: [
          { text: "What is in this picture, and the weather in Paris?" },
          { image: { format: "png", source: { bytes: "iVBORw0KGgo=" } } },
        ],
      },
      {
        role: "assistant",
        content: [
          {
            reasoningContent: {
              reasoningText: { text: "Need the weather tool.", signature: "sig-abc" },
            },
          },
          { text: "A cat. Checking the weather." },
          { toolUse: { toolUseId: "tooluse_1", name: "get_weather", input: { city: "Paris" } } },
          { toolUse: { toolUseId: "tooluse_2", name: "get_time", input: {} } },
        ],
      },
      {
        // Two user turns in a row become one: Converse insists on alternating roles.
        role: "user",
        content: [
          { toolResult: { toolUseId: "tooluse_1", content: [{ text: '{"temp":21}' }] } },
          {
            toolResult: {
              toolUseId: "tooluse_2",
              content: [{ text: "clock broken" }],
              status: "error",
            },
          },
          { text: "And tomorrow?" },
        ],
      },
    ],
    system: [{ text: "Be brief." }],
    toolConfig: {
      tools: [
        {
          toolSpec: {
            name: "get_weather",
            description: "Current weather",
            inputSchema: {
              json: {
                type: "object",
                properties: { city: { type: "string" } },
                required: ["city"],
              },
            },
          },
        },
        {
          toolSpec: { name: "get_time", inputSchema: { json: { type: "object", properties: {} } } },
        },
      ],
      toolChoice: { auto: {} },
    },
    inferenceConfig: { maxTokens: 512, temperature: 0.2, topP: 0.9, stopSequences: ["END"] },
  });
});

Deno.test("bedrock request: tool choice forms", () => {
  const tools = [{ name: "f", parameters: { type: "object" } }];
  const choice = (toolChoice: IrRequest["toolChoice"]) =>
    (converseRequestBody({ ...hello, tools, toolChoice }).toolConfig as Record<string, unknown>)
      .toolChoice;
  assert.deepEqual(choice("required"), { any: {} });
  assert.deepEqual(choice({ name: "f" }), { tool: { name: "f" } });
  assert.equal(choice(undefined), undefined);
  assert.equal(converseRequestBody({ ...hello, toolChoice: "none" }).toolConfig, undefined);
});

Deno.test("bedrock request: what Converse cannot express is refused, not dropped", () => {
  const refused = (ir: IrRequest, code: string) =>
    assert.throws(() => converseRequestBody(ir), (err) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, code);
      assert.equal(err.status, 400);
      return true;
    });
  const user = (content: IrRequest["messages"][number]["content"]): IrRequest => ({
    ...hello,
    messages: [{ role: "user", content }],
  });
  // What Converse has no field for is named by unsupportedFor (so the engine can skip a
  // Bedrock candidate up front) and refused by the body builder alike.
  const inexpressible: IrRequest[] = [
    user([{ type: "image_url", url: "https://example.com/cat.png" }]),
    user([{ type: "image", mediaType: "image/bmp", data: "Qk0=" }]),
    { ...hello, tools: [{ name: "f", parameters: {} }], toolChoice: "none" },
    { ...hello, responseFormat: { type: "json_object" } },
  ];
  for (const ir of inexpressible) {
    assert.equal(bedrockUpstream.unsupportedFor(ir).length, 1);
    refused(ir, "gw.client.unsupported");
  }
  assert.deepEqual(bedrockUpstream.unsupportedFor(hello), []);
  refused({ ...hello, toolChoice: "required" }, "gw.client.invalid_request");
  refused({
    ...hello,
    messages: [{
      role: "assistant",
      content: [{ type: "tool_call", id: "t", name: "f", arguments: "[1,2]" }],
    }],
  }, "gw.client.invalid_request");
});

Deno.test("bedrock request: a JSON schema becomes outputConfig.textFormat, schema as text", () => {
  const schema = { type: "object", properties: { a: { type: "string" } }, required: ["a"] };
  const body = converseRequestBody({
    ...hello,
    responseFormat: { type: "json_schema", name: "thing", description: "a thing", schema },
  });
  assert.deepEqual(body.outputConfig, {
    textFormat: {
      type: "json_schema",
      structure: {
        jsonSchema: { name: "thing", description: "a thing", schema: JSON.stringify(schema) },
      },
    },
  });
  assert.equal(converseRequestBody(hello).outputConfig, undefined);
});

Deno.test("bedrock request: URL per model and mode, model id as one path segment", () => {
  assert.equal(
    converseUrl("https://bedrock-runtime.us-east-1.amazonaws.com/", { model: MODEL, stream: true }),
    "https://bedrock-runtime.us-east-1.amazonaws.com/model/" +
      "anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream",
  );
  assert.equal(
    converseUrl("http://127.0.0.1:9", {
      model: "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.x",
      stream: false,
    }),
    "http://127.0.0.1:9/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3A" +
      "inference-profile%2Fus.x/converse",
  );
});

// --- signing -----------------------------------------------------------------

Deno.test("bedrock sign: buildRequest signs for the region's runtime and verifies", async () => {
  const req = await bedrockUpstream.buildRequest(call(hello));
  assert.equal(
    req.url,
    `https://bedrock-runtime.us-east-1.amazonaws.com/model/${
      encodeURIComponent(MODEL)
    }/converse-stream`,
  );
  assert.equal(req.method, "POST");
  assert.equal(req.headers.get("content-type"), "application/json");
  assert.match(
    req.headers.get("authorization") ?? "",
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/us-east-1\/bedrock\/aws4_request, SignedHeaders=host;x-amz-date, Signature=[0-9a-f]{64}$/,
  );
  assert.deepEqual(await req.clone().json(), converseRequestBody(hello));
  assert.equal(await verifySigV4(req, creds), true);
});

Deno.test("bedrock sign: the upstream's extra headers ride unsigned, the signature still verifies", async () => {
  const base = call(hello);
  const upstream = {
    ...base.upstream,
    headers: { "X-Tenant": "acme", "X-Key": { env: "TENANT" } },
  };
  const req = await bedrockUpstream.buildRequest({
    ...base,
    upstream,
    env: (name) => ({ ...env, TENANT: "tenant-secret" })[name],
  });
  assert.equal(req.headers.get("x-tenant"), "acme");
  assert.equal(req.headers.get("x-key"), "tenant-secret");
  assert.match(req.headers.get("authorization") ?? "", /SignedHeaders=host;x-amz-date,/);
  assert.equal(await verifySigV4(req, creds), true);
});

Deno.test("bedrock sign: tampered, unsigned and wrongly keyed requests are rejected", async () => {
  const req = await bedrockUpstream.buildRequest(call(hello));
  const body = await req.clone().text();
  const copy = (init: { url?: string; body?: string; drop?: string }) => {
    const headers = new Headers(req.headers);
    if (init.drop) headers.delete(init.drop);
    return new Request(init.url ?? req.url, { method: "POST", headers, body: init.body ?? body });
  };
  assert.equal(await verifySigV4(copy({}), creds), true);
  assert.equal(await verifySigV4(copy({ body: body.replace("Hello", "Hellp") }), creds), false);
  assert.equal(
    await verifySigV4(copy({ url: req.url.replace("converse-stream", "converse") }), creds),
    false,
  );
  assert.equal(await verifySigV4(copy({ drop: "authorization" }), creds), false);
  assert.equal(await verifySigV4(copy({ drop: "x-amz-date" }), creds), false);
  assert.equal(await verifySigV4(req, { ...creds, secretAccessKey: "wrong" }), false);
  assert.equal(await verifySigV4(req, { ...creds, region: "eu-west-1" }), false);
});

Deno.test("bedrock sign: a session token is signed along", async () => {
  const req = await signedPost("https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse", {
    body: "{}",
    credentials: { ...creds, sessionToken: "FwoGZXIvYXdzEJr" },
    datetime: "20250102T030405Z",
  });
  assert.equal(req.headers.get("x-amz-security-token"), "FwoGZXIvYXdzEJr");
  assert.match(
    req.headers.get("authorization") ?? "",
    /SignedHeaders=host;x-amz-date;x-amz-security-token,/,
  );
  assert.equal(req.headers.get("x-amz-date"), "20250102T030405Z");
  assert.equal(await verifySigV4(req, creds), true);
});

Deno.test("bedrock sign: a missing key env var is a config error naming the variable", async () => {
  await assert.rejects(
    () => bedrockUpstream.buildRequest(call(hello, { env: { AWS_ACCESS_KEY_ID: "AK" } })),
    (err) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, "gw.upstream.credentials");
      assert.equal(err.source, "config");
      assert.match(err.message, /AWS_SECRET_ACCESS_KEY/);
      return true;
    },
  );
});

// --- stream framing and decoding ---------------------------------------------

Deno.test("bedrock stream: a recorded stream decodes into gateway events", async () => {
  const frames = await decode(bedrockStreamChunks(weatherScript, { pingFirst: 1 }));
  assert.deepEqual(frames.map((f) => f.content), [
    false, // messageStart
    false, // messageStart (the scripted slow opening)
    true, // text delta
    true, // text delta
    true, // contentBlockStop
    true, // contentBlockStart toolUse
    true, // toolUse delta
    true, // toolUse delta
    true, // contentBlockStop
    true, // messageStop
    true, // metadata
  ]);
  const usage = { inputTokens: 120, outputTokens: 9, cachedTokens: 100 };
  assert.deepEqual(
    frames.flatMap((f) => f.events),
    [
      { type: "text", text: "Let me " },
      { type: "text", text: "check." },
      {
        type: "tool_call_start",
        index: 0,
        id: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
        name: "get_weather",
      },
      { type: "tool_call_args", index: 0, args: '{"city":' },
      { type: "tool_call_args", index: 0, args: ' "Paris"}' },
      { type: "finish", reason: "tool_calls" },
      { type: "usage", usage },
    ] satisfies IrEvent[],
  );
  assert.deepEqual(frames.at(-1)?.usage, usage);
  assert.ok(frames.every((f) => f.error === undefined));
});

Deno.test("bedrock stream: reasoning deltas and a second tool get their own indexes", async () => {
  const chunks = [
    bedrockEvent("messageStart", { role: "assistant" }),
    bedrockEvent("contentBlockDelta", {
      contentBlockIndex: 0,
      delta: { reasoningContent: { text: "Think" } },
    }),
    bedrockEvent("contentBlockDelta", {
      contentBlockIndex: 0,
      delta: { reasoningContent: { signature: "s" } },
    }),
    bedrockEvent("contentBlockStop", { contentBlockIndex: 0 }),
    bedrockEvent("contentBlockStart", {
      contentBlockIndex: 1,
      start: { toolUse: { toolUseId: "a", name: "f" } },
    }),
    bedrockEvent("contentBlockStart", {
      contentBlockIndex: 2,
      start: { toolUse: { toolUseId: "b", name: "g" } },
    }),
    bedrockEvent("contentBlockDelta", {
      contentBlockIndex: 2,
      delta: { toolUse: { input: "{}" } },
    }),
    bedrockEvent("messageStop", { stopReason: "max_tokens" }),
  ];
  assert.deepEqual((await decode(chunks)).flatMap((f) => f.events), [
    { type: "reasoning", text: "Think" },
    // The signature is kept, so the thinking can go back to Claude in the next turn.
    { type: "reasoning", text: "", signature: "s" },
    { type: "tool_call_start", index: 0, id: "a", name: "f" },
    { type: "tool_call_start", index: 1, id: "b", name: "g" },
    { type: "tool_call_args", index: 1, args: "{}" },
    { type: "finish", reason: "length" },
  ]);
});

Deno.test("bedrock stream: framing survives a split at every byte offset", async () => {
  const script: BedrockScript = {
    text: ["Hi"],
    toolCall: { id: "t1", name: "f", argsPieces: ["{}"] },
    usage: { input: 3, output: 2 },
  };
  const bytes = concat(bedrockStreamChunks(script));
  const whole = await decode([bytes]);
  const expected = whole.map(({ raw, content, events, usage }) => ({
    raw,
    content,
    events,
    usage,
  }));
  assert.equal(whole.length, 8);
  for (let cut = 0; cut <= bytes.byteLength; cut++) {
    const frames = await decode([bytes.slice(0, cut), bytes.slice(cut)]);
    assert.deepEqual(
      frames.map(({ raw, content, events, usage }) => ({ raw, content, events, usage })),
      expected,
      `split at ${cut}`,
    );
  }
  for (const chunkSize of [1, 3, 7, 64]) {
    const frames = await decode(bedrockStreamChunks(script, { chunkSize }));
    assert.deepEqual(concat(frames.map((f) => f.raw)), bytes, `chunks of ${chunkSize}`);
    assert.deepEqual(frames.flatMap((f) => f.events), whole.flatMap((f) => f.events));
  }
});

Deno.test("bedrock stream: exceptions inside the stream become gateway errors", async () => {
  const cases: { type: string; code: string; status: number; upstreamType: string }[] = [
    {
      type: "throttlingException",
      code: "gw.upstream.rate_limited",
      status: 429,
      upstreamType: "ThrottlingException",
    },
    {
      type: "modelStreamErrorException",
      code: "gw.upstream.error",
      status: 502,
      upstreamType: "ModelStreamErrorException",
    },
    {
      type: "internalServerException",
      code: "gw.upstream.error",
      status: 502,
      upstreamType: "InternalServerException",
    },
    {
      type: "serviceUnavailableException",
      code: "gw.upstream.error",
      status: 502,
      upstreamType: "ServiceUnavailableException",
    },
    {
      type: "validationException",
      code: "gw.upstream.rejected",
      status: 400,
      upstreamType: "ValidationException",
    },
  ];
  for (const c of cases) {
    const frames = await decode([
      bedrockEvent("messageStart", { role: "assistant" }),
      bedrockEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Par" } }),
      bedrockException(c.type, "The model stopped."),
    ]);
    const last = frames.at(-1);
    assert.equal(last?.content, true);
    assert.equal(last?.error?.code, c.code, c.type);
    assert.equal(last?.error?.status, c.status, c.type);
    assert.equal(last?.error?.upstreamType, c.upstreamType, c.type);
    assert.match(last?.error?.message ?? "", /The model stopped\./);
  }
});

Deno.test("bedrock stream: corrupt, truncated and absurd frames end with one error", async () => {
  const good = bedrockStreamChunks({ text: ["Hi"], usage: { input: 1, output: 1 } });
  const flipped = concat(good);
  const second = good[0]?.byteLength ?? 0;
  flipped[second + 30] = (flipped[second + 30] ?? 0) ^ 0xff;
  const corrupt = await decode([flipped]);
  assert.equal(corrupt.length, 2);
  assert.equal(corrupt[1]?.error?.code, "gw.upstream.bad_response");

  const bytes = concat(good);
  const truncated = await decode([bytes.slice(0, bytes.byteLength - 5)]);
  assert.equal(truncated.at(-1)?.error?.code, "gw.upstream.bad_response");
  assert.match(truncated.at(-1)?.error?.message ?? "", /ended inside a message/);
  assert.equal(truncated.filter((f) => f.error).length, 1);

  const absurd = await decode([new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])]);
  assert.equal(absurd.length, 1);
  assert.equal(absurd[0]?.error?.code, "gw.upstream.bad_response");
  assert.match(absurd[0]?.error?.message ?? "", /announced a 4294967295-byte message/);
});

Deno.test("bedrock stream: a generic event-stream error message is an upstream error", async () => {
  const message = eventStreamCodec.encode({
    headers: {
      ":message-type": { type: "string", value: "error" },
      ":error-code": { type: "string", value: "InternalFailure" },
      ":error-message": { type: "string", value: "stream broke" },
    },
    body: new Uint8Array(0),
  });
  const [frame] = await decode([message]);
  assert.equal(frame?.content, true);
  assert.equal(frame?.error?.code, "gw.upstream.error");
  assert.equal(frame?.error?.upstreamType, "InternalFailure");
  assert.match(frame?.error?.message ?? "", /stream broke/);
});

// --- whole answers -----------------------------------------------------------

Deno.test("bedrock whole: text, reasoning, tool call, finish and usage", () => {
  const res = bedrockUpstream.decodeWhole(
    bedrockWholeBody({ ...weatherScript, reasoning: ["Hm", "m."] }),
  );
  assert.match(res.id, /^bedrock-/);
  assert.equal(res.model, "");
  assert.deepEqual(res.content, [
    { type: "reasoning", text: "Hmm.", signature: "sig-1" },
    { type: "text", text: "Let me check." },
    {
      type: "tool_call",
      id: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
      name: "get_weather",
      arguments: '{"city":"Paris"}',
    },
  ]);
  assert.equal(res.finish, "tool_calls");
  assert.deepEqual(res.usage, { inputTokens: 120, outputTokens: 9, cachedTokens: 100 });
});

Deno.test("bedrock whole: every stop reason maps", () => {
  const table: [BedrockScript["finish"] & string, IrFinishReason][] = [
    ["end_turn", "stop"],
    ["stop_sequence", "stop"],
    ["tool_use", "tool_calls"],
    ["max_tokens", "length"],
    ["content_filtered", "content_filter"],
    ["guardrail_intervened", "content_filter"],
  ];
  for (const [finish, ir] of table) {
    const res = bedrockUpstream.decodeWhole(
      bedrockWholeBody({ text: ["x"], usage: { input: 1, output: 1 }, finish }),
    );
    assert.equal(res.finish, ir, finish);
  }
});

Deno.test("bedrock whole: unreadable answers are bad responses", () => {
  for (const body of ["<html>", "{}", '{"output":{}}', "[1]"]) {
    assert.throws(() => bedrockUpstream.decodeWhole(body), (err) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, "gw.upstream.bad_response");
      return true;
    }, body);
  }
});

// --- errors ------------------------------------------------------------------

Deno.test("bedrock errors: status and exception classify whose fault it is", () => {
  const table: { status: number; body: string; code: string; gwStatus: number; source: string }[] =
    [
      {
        status: 400,
        body: errorBody(400, "Malformed input request"),
        code: "gw.upstream.rejected",
        gwStatus: 400,
        source: "client",
      },
      {
        status: 403,
        body: errorBody(403, "The request signature we calculated does not match"),
        code: "gw.upstream.credentials",
        gwStatus: 502,
        source: "upstream",
      },
      {
        status: 404,
        body: errorBody(404, "Model not found"),
        code: "gw.upstream.rejected",
        gwStatus: 404,
        source: "client",
      },
      {
        status: 408,
        body: errorBody(408, "Model timed out"),
        code: "gw.upstream.error",
        gwStatus: 502,
        source: "upstream",
      },
      {
        status: 424,
        body: errorBody(424, "Model failed"),
        code: "gw.upstream.error",
        gwStatus: 502,
        source: "upstream",
      },
      {
        status: 429,
        body: errorBody(429, "Too many tokens"),
        code: "gw.upstream.rate_limited",
        gwStatus: 429,
        source: "upstream",
      },
      {
        status: 500,
        body: errorBody(500, "Internal"),
        code: "gw.upstream.error",
        gwStatus: 502,
        source: "upstream",
      },
      {
        status: 503,
        body: errorBody(503, "Unavailable"),
        code: "gw.upstream.error",
        gwStatus: 502,
        source: "upstream",
      },
      {
        status: 502,
        body: "<html>Bad Gateway</html>",
        code: "gw.upstream.error",
        gwStatus: 502,
        source: "upstream",
      },
    ];
  for (const row of table) {
    const err = bedrockUpstream.decodeError(row.status, row.body);
    assert.equal(err.code, row.code, String(row.status));
    assert.equal(err.status, row.gwStatus, String(row.status));
    assert.equal(err.source, row.source, String(row.status));
  }
  assert.equal(
    bedrockUpstream.decodeError(400, errorBody(400, "Malformed input request")).message,
    "Malformed input request",
  );
  assert.match(bedrockUpstream.decodeError(502, "<html>Bad Gateway</html>").message, /Bad Gateway/);
});

Deno.test("bedrock errors: the x-amzn-ErrorType header and odd casings are read", () => {
  const header = errorHeaders(400)["x-amzn-errortype"];
  const err = decodeBedrockError(400, errorBody(400, "bad field"), { errorType: header });
  assert.equal(err.upstreamType, "ValidationException");
  assert.equal(err.message, "bad field");
  const capital = decodeBedrockError(400, JSON.stringify({ Message: "Capital M" }));
  assert.equal(capital.message, "Capital M");
  const typed = decodeBedrockError(
    400,
    JSON.stringify({ __type: "com.amazon.coral#ValidationException", message: "m" }),
  );
  assert.equal(typed.upstreamType, "ValidationException");
  const modelError = decodeBedrockError(400, errorBody(400, "x"), {
    errorType: "ModelErrorException",
  });
  assert.equal(modelError.source, "upstream");
  assert.equal(
    bedrockStreamException("ThrottlingException", "{}").code,
    "gw.upstream.rate_limited",
  );
});

// --- over real HTTP, against the fake upstream -------------------------------

async function withFakeBedrock(
  answer: (req: Request) => Promise<Response>,
  run: (baseUrl: string) => Promise<void>,
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, answer);
  try {
    await run(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
  }
}

function fakeBedrock(req: Request): Promise<Response> {
  return verifySigV4(req, creds).then((ok) => {
    if (!ok) {
      return new Response(errorBody(403, "The request signature we calculated does not match"), {
        status: 403,
        headers: errorHeaders(403),
      });
    }
    return new Response(
      ReadableStream.from(bedrockStreamChunks(weatherScript, { chunkSize: 50 })),
      {
        headers: { "content-type": "application/vnd.amazon.eventstream" },
      },
    );
  });
}

Deno.test("bedrock http: a signed stream call round-trips through the fake upstream", async () => {
  await withFakeBedrock(fakeBedrock, async (baseUrl) => {
    const res = await fetch(await bedrockUpstream.buildRequest(call(hello, { baseUrl })));
    assert.equal(res.status, 200);
    const frames = await Array.fromAsync(res.body!.pipeThrough(bedrockUpstream.decodeStream()));
    const events = frames.flatMap((f) => f.events);
    assert.deepEqual(events.filter((e) => e.type === "text").map((e) => e.text), [
      "Let me ",
      "check.",
    ]);
    assert.deepEqual(events.at(-2), { type: "finish", reason: "tool_calls" });
  });
});

Deno.test("bedrock http: wrong keys get the fake's 403, read as our credentials", async () => {
  await withFakeBedrock(fakeBedrock, async (baseUrl) => {
    const wrong = { ...env, AWS_SECRET_ACCESS_KEY: "not-the-secret" };
    const res = await fetch(
      await bedrockUpstream.buildRequest(call(hello, { baseUrl, env: wrong })),
    );
    assert.equal(res.status, 403);
    const err = decodeBedrockError(res.status, await res.text(), {
      errorType: res.headers.get("x-amzn-errortype"),
    });
    assert.equal(err.code, "gw.upstream.credentials");
    assert.equal(err.upstreamType, "AccessDeniedException");
  });
});
