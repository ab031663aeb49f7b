/**
 * Every client format against every upstream kind, streamed and whole, with
 * the official SDKs as clients: text, a tool call with its arguments, the
 * finish reason and the usage must arrive in the client's own format.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { startTestGateway, type TestGateway } from "./harness.ts";
import { chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "./fake_upstreams/openai_responses_script.ts";
import { type Call, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import * as geminiFake from "./fake_upstreams/gemini_script.ts";
import * as interactionsFake from "./fake_upstreams/interactions_script.ts";
import {
  bedrockStreamChunks,
  bedrockWholeBody,
  verifySigV4,
} from "./fake_upstreams/bedrock_script.ts";

const AWS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "test-secret", region: "us-east-1" };

const TOOL = { id: "call_1", name: "get_weather", argsPieces: ['{"city":', '"Paris"}'] };
const TEXT = ["Hel", "lo"];
const USAGE = { input: 7, output: 5 };

interface Outcome {
  text: string;
  toolName?: string;
  toolArgs?: string;
  finish: string;
  inputTokens?: number;
  outputTokens?: number;
}

const isStream = (call: Call) => (call.json as { stream?: boolean })?.stream === true;

/** How each upstream kind's fake answers, streamed or whole. */
const UPSTREAMS: Record<string, (call: Call) => Script | Promise<Script>> = {
  "openai-chat": (call) =>
    isStream(call)
      ? chatStream({ text: TEXT, toolCall: TOOL, usage: USAGE })
      : chatWhole({ text: TEXT, toolCall: TOOL, usage: USAGE }),
  "openai-responses": (call) => ({
    headers: { "content-type": isStream(call) ? "text/event-stream" : "application/json" },
    body:
      (isStream(call)
        ? responsesStreamChunks({ text: TEXT, toolCall: TOOL, usage: USAGE, finish: "tool_calls" })
        : [responsesWholeBody({ text: TEXT, toolCall: TOOL, usage: USAGE, finish: "tool_calls" })])
        .map((send) => ({ send })),
  }),
  "anthropic": (call) => ({
    headers: { "content-type": isStream(call) ? "text/event-stream" : "application/json" },
    body:
      (isStream(call)
        ? anthropicFake.streamChunks({ text: TEXT, toolCall: TOOL, usage: USAGE, pingFirst: 1 })
        : [anthropicFake.wholeBody({ text: TEXT, toolCall: TOOL, usage: USAGE })])
        .map((send) => ({ send })),
  }),
  "gemini": (call) => {
    const stream = call.path.includes(":streamGenerateContent");
    return {
      headers: { "content-type": stream ? "text/event-stream" : "application/json" },
      body:
        (stream
          ? geminiFake.streamChunks({ text: TEXT, toolCall: TOOL, usage: USAGE, pingFirst: 1 })
          : [geminiFake.wholeBody({ text: TEXT, toolCall: TOOL, usage: USAGE })])
          .map((send) => ({ send })),
    };
  },
  "gemini-interactions": (call) =>
    interactionsFake.answer(call, { text: TEXT, toolCall: TOOL, usage: USAGE }),
  "bedrock": async (call) => {
    const signed = await verifySigV4(
      new Request(`http://${call.headers.get("host")}${call.path}`, {
        method: call.method,
        headers: call.headers,
        body: call.body,
      }),
      AWS,
    );
    if (!signed) return { status: 403, body: [{ send: '{"message":"bad signature"}' }] };
    const stream = call.path.endsWith("/converse-stream");
    const script = { text: TEXT, toolCall: TOOL, usage: USAGE, finish: "tool_use" as const };
    return {
      headers: {
        "content-type": stream ? "application/vnd.amazon.eventstream" : "application/json",
      },
      body: (stream ? bedrockStreamChunks(script, { pingFirst: 1 }) : [bedrockWholeBody(script)])
        .map((send) => ({ send })),
    };
  },
};

const tools = [{
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "weather",
    parameters: { type: "object", properties: { city: { type: "string" } } },
  },
}];

/** How each client format asks and what it read back. */
const CLIENTS: Record<string, (gw: TestGateway, stream: boolean) => Promise<Outcome>> = {
  "openai-chat": async (gw, stream) => {
    const client = gw.openai();
    const body = {
      model: "smart",
      messages: [{ role: "user" as const, content: "weather in Paris?" }],
      tools,
    };
    if (!stream) {
      const res = await client.chat.completions.create(body);
      const choice = res.choices[0]!;
      const call = choice.message.tool_calls?.[0];
      return {
        text: choice.message.content ?? "",
        toolName: call?.type === "function" ? call.function.name : undefined,
        toolArgs: call?.type === "function" ? call.function.arguments : undefined,
        finish: choice.finish_reason,
        inputTokens: res.usage?.prompt_tokens,
        outputTokens: res.usage?.completion_tokens,
      };
    }
    const out: Outcome = { text: "", finish: "", toolArgs: "" };
    const chunks = await client.chat.completions.create({
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of chunks) {
      const choice = chunk.choices[0];
      out.text += choice?.delta.content ?? "";
      const call = choice?.delta.tool_calls?.[0];
      if (call?.function?.name) out.toolName = call.function.name;
      out.toolArgs += call?.function?.arguments ?? "";
      if (choice?.finish_reason) out.finish = choice.finish_reason;
      if (chunk.usage) {
        out.inputTokens = chunk.usage.prompt_tokens;
        out.outputTokens = chunk.usage.completion_tokens;
      }
    }
    return out;
  },
  "openai-responses": async (gw, stream) => {
    const client: OpenAI = gw.openai();
    const body = {
      model: "smart",
      input: "weather in Paris?",
      tools: [{
        type: "function" as const,
        name: "get_weather",
        description: "weather",
        parameters: { type: "object", properties: { city: { type: "string" } } },
        strict: false,
      }],
    };
    const res = stream
      ? await client.responses.stream(body).finalResponse()
      : await client.responses.create(body);
    const call = res.output.find((o) => o.type === "function_call");
    return {
      text: res.output_text,
      toolName: call?.type === "function_call" ? call.name : undefined,
      toolArgs: call?.type === "function_call" ? call.arguments : undefined,
      finish: call ? "tool_calls" : res.status ?? "",
      inputTokens: res.usage?.input_tokens,
      outputTokens: res.usage?.output_tokens,
    };
  },
};

CLIENTS["anthropic"] = async (gw, stream) => {
  const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
  const body = {
    model: "smart",
    max_tokens: 256,
    messages: [{ role: "user" as const, content: "weather in Paris?" }],
    tools: [{
      name: "get_weather",
      description: "weather",
      input_schema: { type: "object" as const, properties: { city: { type: "string" } } },
    }],
  };
  const msg = stream
    ? await client.messages.stream(body).finalMessage()
    : await client.messages.create(body);
  const call = msg.content.find((b) => b.type === "tool_use");
  return {
    text: msg.content.map((b) => (b.type === "text" ? b.text : "")).join(""),
    toolName: call?.type === "tool_use" ? call.name : undefined,
    toolArgs: call?.type === "tool_use" ? JSON.stringify(call.input) : undefined,
    finish: msg.stop_reason ?? "",
    inputTokens: msg.usage.input_tokens,
    outputTokens: msg.usage.output_tokens,
  };
};

CLIENTS["gemini"] = async (gw, stream) => {
  const ai = new GoogleGenAI({
    apiKey: "unused",
    httpOptions: { baseUrl: gw.url, apiVersion: "v1beta" },
  });
  const request = {
    model: "smart",
    contents: "weather in Paris?",
    config: {
      tools: [{
        functionDeclarations: [{
          name: "get_weather",
          description: "weather",
          parametersJsonSchema: { type: "object", properties: { city: { type: "string" } } },
        }],
      }],
    },
  };
  const chunks = stream
    ? await Array.fromAsync(await ai.models.generateContentStream(request))
    : [await ai.models.generateContent(request)];
  const out: Outcome = { text: "", finish: "" };
  for (const chunk of chunks) {
    out.text += chunk.candidates?.[0]?.content?.parts?.map((p) => p.text ?? "").join("") ?? "";
    const call = chunk.functionCalls?.[0];
    if (call) {
      out.toolName = call.name;
      out.toolArgs = JSON.stringify(call.args);
    }
    out.finish = chunk.candidates?.[0]?.finishReason ?? out.finish;
    if (chunk.usageMetadata) {
      out.inputTokens = chunk.usageMetadata.promptTokenCount;
      out.outputTokens = chunk.usageMetadata.candidatesTokenCount;
    }
  }
  return out;
};

CLIENTS["gemini-interactions"] = async (gw, stream) => {
  const ai = new GoogleGenAI({ apiKey: "unused", httpOptions: { baseUrl: gw.url } });
  const body = {
    model: "smart",
    input: "weather in Paris?",
    tools: [{
      type: "function" as const,
      name: "get_weather",
      description: "weather",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    }],
  };
  if (!stream) {
    const res = await ai.interactions.create(body);
    const call = res.steps.find((s) => s.type === "function_call");
    return {
      text: res.output_text ?? "",
      toolName: call?.type === "function_call" ? call.name : undefined,
      toolArgs: call?.type === "function_call" ? JSON.stringify(call.arguments) : undefined,
      finish: res.status,
      inputTokens: res.usage?.total_input_tokens,
      outputTokens: res.usage?.total_output_tokens,
    };
  }
  const out: Outcome = { text: "", finish: "", toolArgs: "" };
  for await (const event of await ai.interactions.create({ ...body, stream: true })) {
    if (event.event_type === "step.start" && event.step.type === "function_call") {
      out.toolName = event.step.name;
    } else if (event.event_type === "step.delta") {
      if (event.delta.type === "text") out.text += event.delta.text;
      if (event.delta.type === "arguments_delta") out.toolArgs += event.delta.arguments ?? "";
    } else if (event.event_type === "interaction.completed") {
      out.finish = event.interaction.status;
      out.inputTokens = event.interaction.usage?.total_input_tokens;
      out.outputTokens = event.interaction.usage?.total_output_tokens;
    }
  }
  return out;
};

const FINISH: Record<string, string> = {
  "openai-chat": "tool_calls",
  "openai-responses": "tool_calls",
  "anthropic": "tool_use",
  "gemini": "STOP",
  "gemini-interactions": "requires_action",
};

/** The one upstream of a matrix cell; Bedrock signs with the test's AWS keys. */
function upstreamOf(kind: string, url: string): ConfigInput["upstreams"][number] {
  if (kind !== "bedrock") return { id: "u", kind: kind as "openai-chat", base_url: url };
  return {
    id: "u",
    kind: "bedrock",
    base_url: url,
    region: AWS.region,
    access_key_env: "AWS_AK",
    secret_key_env: "AWS_SK",
  };
}

for (const [kind, answer] of Object.entries(UPSTREAMS)) {
  for (const [format, ask] of Object.entries(CLIENTS)) {
    for (const stream of [false, true]) {
      Deno.test(`${format} client ← ${kind} upstream, ${stream ? "streamed" : "whole"}`, async () => {
        const up = startFakeUpstream({ fallback: answer });
        const upstream = upstreamOf(kind, up.url);
        const config: ConfigInput = {
          upstreams: [upstream],
          routes: [{ model: "smart", candidates: [{ upstream: "u", model: "up-model" }] }],
        };
        const gw = await startTestGateway(config, {
          env: { AWS_AK: AWS.accessKeyId, AWS_SK: AWS.secretAccessKey },
        });
        try {
          const out = await ask(gw, stream);
          assert.equal(out.text, "Hello");
          assert.equal(out.toolName, "get_weather");
          assert.deepEqual(JSON.parse(out.toolArgs ?? ""), { city: "Paris" });
          assert.equal(out.finish, FINISH[format]);
          assert.equal(out.inputTokens, USAGE.input);
          assert.equal(out.outputTokens, USAGE.output);
          assert.equal(up.calls.length, 1);
        } finally {
          await gw.stop();
          await up.close();
        }
      });
    }
  }
}

/** A JSON schema every format can hold an answer to (Anthropic wants closed objects). */
const SCHEMA = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
  additionalProperties: false,
};

/** Each client format's whole request for structured output, as raw HTTP. */
const STRUCTURED: Record<string, { path: string; body: Record<string, unknown> }> = {
  "openai-chat": {
    path: "/v1/chat/completions",
    body: {
      model: "smart",
      messages: [{ role: "user", content: "weather?" }],
      response_format: { type: "json_schema", json_schema: { name: "w", schema: SCHEMA } },
    },
  },
  "openai-responses": {
    path: "/v1/responses",
    body: {
      model: "smart",
      input: "weather?",
      text: { format: { type: "json_schema", name: "w", schema: SCHEMA } },
    },
  },
  "anthropic": {
    path: "/v1/messages",
    body: {
      model: "smart",
      max_tokens: 64,
      messages: [{ role: "user", content: "weather?" }],
      output_config: { format: { type: "json_schema", schema: SCHEMA } },
    },
  },
  "gemini": {
    path: "/v1beta/models/smart:generateContent",
    body: {
      contents: [{ role: "user", parts: [{ text: "weather?" }] }],
      generationConfig: { responseMimeType: "application/json", responseJsonSchema: SCHEMA },
    },
  },
  "gemini-interactions": {
    path: "/v1beta/interactions",
    body: {
      model: "smart",
      input: "weather?",
      response_format: { type: "text", mime_type: "application/json", schema: SCHEMA },
    },
  },
};

/** The value at a dotted path in a parsed JSON body. */
function at(body: unknown, path: string): unknown {
  return path.split(".").reduce<unknown>(
    (v, key) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[key] : v),
    body,
  );
}

/** Where each upstream kind's body holds the schema the answer must follow. */
const SCHEMA_IN: Record<string, (body: unknown) => unknown> = {
  "openai-chat": (b) => at(b, "response_format.json_schema.schema"),
  "openai-responses": (b) => at(b, "text.format.schema"),
  "anthropic": (b) => at(b, "output_config.format.schema"),
  "gemini": (b) =>
    at(b, "generationConfig.responseMimeType") === "application/json"
      ? at(b, "generationConfig.responseJsonSchema")
      : undefined,
  "gemini-interactions": (b) =>
    at(b, "response_format.mime_type") === "application/json"
      ? at(b, "response_format.schema")
      : undefined,
  // Converse takes the schema as JSON text.
  "bedrock": (b) =>
    JSON.parse(String(at(b, "outputConfig.textFormat.structure.jsonSchema.schema"))),
};

for (const [kind, answer] of Object.entries(UPSTREAMS)) {
  for (const [format, ask] of Object.entries(STRUCTURED)) {
    Deno.test(`${format} client → ${kind} upstream: structured output keeps its schema`, async () => {
      const up = startFakeUpstream({ fallback: answer });
      const upstream = upstreamOf(kind, up.url);
      const gw = await startTestGateway({
        upstreams: [upstream],
        routes: [{ model: "smart", candidates: [{ upstream: "u", model: "up-model" }] }],
      }, { env: { AWS_AK: AWS.accessKeyId, AWS_SK: AWS.secretAccessKey } });
      try {
        const res = await fetch(`${gw.url}${ask.path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(ask.body),
        });
        assert.equal(res.status, 200, await res.clone().text());
        await res.body?.cancel();
        assert.equal(up.calls.length, 1);
        assert.deepEqual(SCHEMA_IN[kind]!(up.calls[0]!.json), SCHEMA);
      } finally {
        await gw.stop();
        await up.close();
      }
    });
  }
}
