/**
 * Real requests of coding agents (tests/fixtures/agents/, captured from
 * Claude Code, Codex and Gemini CLI) sent through the gateway to a fake
 * upstream of every kind: the upstream must get a request its provider
 * accepts, and the agent an answer in its own format, with tool calls named
 * as the agent declared its tools.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { describeSkipped } from "../gateway/route/candidates.ts";
import { isRecord } from "../gateway/runtime/json.ts";
import { SseDecoderStream, type SseEvent } from "../gateway/formats/sse_stream.ts";
import {
  anthropicRequestBody,
  parseAnthropicRequest,
} from "../gateway/formats/anthropic/request.ts";
import { converseRequestBody } from "../gateway/formats/bedrock/request.ts";
import { geminiRequestBody } from "../gateway/formats/gemini/request.ts";
import {
  chatRequestBody,
  maxTokensField,
  parseChatRequest,
} from "../gateway/formats/openai_chat/request.ts";
import { responsesRequestBody } from "../gateway/formats/openai_responses/request.ts";
import { flatToolName } from "../gateway/formats/openai_responses/client_tools.ts";
import { lowerCaseSchemaTypes } from "../gateway/formats/gemini/schema.ts";
import type { IrRequest } from "../gateway/formats/ir.ts";
import { startTestGateway } from "./harness.ts";
import { type Call, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
import { chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "./fake_upstreams/openai_responses_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import * as geminiFake from "./fake_upstreams/gemini_script.ts";
import {
  bedrockStreamChunks,
  bedrockWholeBody,
  verifySigV4,
} from "./fake_upstreams/bedrock_script.ts";

type Json = Record<string, unknown>;
type Kind = "openai-chat" | "openai-responses" | "anthropic" | "gemini" | "bedrock";
type Agent = "claude_code" | "codex" | "gemini_cli";

interface Captured {
  name: string;
  method: string;
  path: string;
  body: Json;
}

const FIXTURES: Record<Agent, Captured[]> = {
  claude_code: await fixture("claude_code"),
  codex: await fixture("codex"),
  gemini_cli: await fixture("gemini_cli"),
};

async function fixture(agent: Agent): Promise<Captured[]> {
  const url = new URL(`./fixtures/agents/${agent}.json`, import.meta.url);
  return JSON.parse(await Deno.readTextFile(url)).requests;
}

/** The upstream kind whose format each agent speaks: its requests pass through unchanged. */
const OWN_KIND: Record<Agent, Kind> = {
  claude_code: "anthropic",
  codex: "openai-responses",
  gemini_cli: "gemini",
};

/**
 * The tool each captured request has the upstream call, by its upstream
 * (flattened) name, and how the agent must see that call come back.
 */
const CALLS: Record<string, { call: string; args: Json; seen: Json } | null> = {
  "claude_code/first_turn": { call: "Read", args: { file_path: "/x" }, seen: { name: "Read" } },
  "claude_code/after_tool_use": { call: "Bash", args: { command: "ls" }, seen: { name: "Bash" } },
  "codex/catalog_model_first_turn": {
    call: "apply_patch",
    args: { input: "*** Begin Patch\n*** End Patch\n" },
    seen: {
      type: "custom_tool_call",
      name: "apply_patch",
      input: "*** Begin Patch\n*** End Patch\n",
    },
  },
  "codex/unknown_model_first_turn": {
    call: "mcp__notes__search_notes",
    args: { query: "milk" },
    seen: { type: "function_call", name: "search_notes", namespace: "mcp__notes" },
  },
  "codex/unknown_model_namespaced_call": {
    call: "multi_agent_v1__spawn_agent",
    args: { message: "go" },
    seen: { type: "function_call", name: "spawn_agent", namespace: "multi_agent_v1" },
  },
  "codex/tool_search_turn": {
    // Loaded by the tool_search_output item of the history, not declared in `tools`.
    call: "mcp__notes__read_note",
    args: { id: "1" },
    seen: { type: "function_call", name: "read_note", namespace: "mcp__notes" },
  },
  "codex/responses_lite_first_turn": {
    // Declared only in an additional_tools input item.
    call: "collaboration__list_agents",
    args: {},
    seen: { type: "function_call", name: "list_agents", namespace: "collaboration" },
  },
  "gemini_cli/router_classifier": null,
  "gemini_cli/first_turn": {
    call: "read_file",
    args: { file_path: "/x" },
    seen: { name: "read_file" },
  },
};

/** Model names per upstream kind: ones whose provider rules the translation must follow. */
const MODELS: Record<Kind, string> = {
  "openai-chat": "gpt-5.5",
  "openai-responses": "gpt-5.5",
  "anthropic": "claude-sonnet-4-5",
  "gemini": "gemini-3-pro",
  "bedrock": "anthropic.claude-sonnet-4-5-v1:0",
};

const AWS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "test-secret", region: "us-east-1" };
const USAGE = { input: 11, output: 3 };

function isStreamed(kind: Kind, call: Call): boolean {
  if (kind === "gemini") return call.path.includes(":streamGenerateContent");
  if (kind === "bedrock") return call.path.endsWith("/converse-stream");
  return (call.json as Json)?.stream === true;
}

/** The fake upstream's answer: "Hi" and, when given, one call of `tool`. */
async function answer(
  kind: Kind,
  call: Call,
  tool: { name: string; args: Json } | null,
): Promise<Script> {
  const toolCall = tool
    ? { id: "call_1", name: tool.name, argsPieces: splitArgs(JSON.stringify(tool.args)) }
    : undefined;
  const text = ["H", "i"];
  const stream = isStreamed(kind, call);
  const sse = { "content-type": "text/event-stream" };
  const json = { "content-type": "application/json" };
  const steps = (chunks: (string | Uint8Array)[]) => chunks.map((send) => ({ send }));
  switch (kind) {
    case "openai-chat":
      return stream
        ? chatStream({ text, toolCall, usage: USAGE })
        : chatWhole({ text, toolCall, usage: USAGE });
    case "openai-responses": {
      const script = {
        text,
        toolCall,
        usage: USAGE,
        finish: toolCall ? "tool_calls" as const : "stop" as const,
      };
      return stream
        ? { headers: sse, body: steps(responsesStreamChunks(script)) }
        : { headers: json, body: steps([responsesWholeBody(script)]) };
    }
    case "anthropic":
      return stream
        ? {
          headers: sse,
          body: steps(anthropicFake.streamChunks({ text, toolCall, usage: USAGE })),
        }
        : {
          headers: json,
          body: steps([anthropicFake.wholeBody({ text, toolCall, usage: USAGE })]),
        };
    case "gemini":
      return stream
        ? { headers: sse, body: steps(geminiFake.streamChunks({ text, toolCall, usage: USAGE })) }
        : { headers: json, body: steps([geminiFake.wholeBody({ text, toolCall, usage: USAGE })]) };
    case "bedrock": {
      const signed = await verifySigV4(
        new Request(`http://${call.headers.get("host")}${call.path}`, {
          method: call.method,
          headers: call.headers,
          body: call.body,
        }),
        AWS,
      );
      if (!signed) return { status: 403, body: [{ send: '{"message":"bad signature"}' }] };
      const script = {
        text,
        toolCall,
        usage: USAGE,
        finish: toolCall ? "tool_use" as const : "end_turn" as const,
      };
      return stream
        ? {
          headers: { "content-type": "application/vnd.amazon.eventstream" },
          body: steps(bedrockStreamChunks(script)),
        }
        : { headers: json, body: steps([bedrockWholeBody(script)]) };
    }
  }
}

/** Streams a tool's arguments in two pieces, as providers do. */
function splitArgs(args: string): string[] {
  const half = Math.floor(args.length / 2);
  return [args.slice(0, half), args.slice(half)];
}

function upstreamOf(kind: Kind, url: string): ConfigInput["upstreams"][number] {
  if (kind !== "bedrock") return { id: "up", kind, base_url: url };
  return {
    id: "up",
    kind,
    base_url: url,
    region: AWS.region,
    access_key_env: "AWS_AK",
    secret_key_env: "AWS_SK",
  };
}

/** The route (model) a captured request asks for: in the body, or in Gemini's URL. */
function routeOf(captured: Captured): string {
  const inPath = /\/models\/([^:]+):/.exec(captured.path)?.[1];
  return inPath ?? String(captured.body.model);
}

// ---------------------------------------------------------------- upstream checks

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Every `type` of every JSON schema in the body is lower-case (JSON Schema's spelling). */
function schemaTypes(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => schemaTypes(v, out));
  else if (isRecord(value)) {
    for (const [key, v] of Object.entries(value)) {
      if (key === "type" && typeof v === "string") out.push(v);
      else schemaTypes(v, out);
    }
  }
  return out;
}

function schemasOf(kind: Kind, body: Json): unknown[] {
  const tools = Array.isArray(body.tools) ? body.tools as Json[] : [];
  switch (kind) {
    case "openai-chat":
      return [
        ...tools.map((t) => (t.function as Json)?.parameters),
        (body.response_format as Json)?.json_schema,
      ];
    case "openai-responses":
      return [...tools.map((t) => t.parameters), (body.text as Json)?.format];
    case "anthropic":
      return [...tools.map((t) => t.input_schema), (body.output_config as Json)?.format];
    case "gemini":
      return [
        ...tools.flatMap((t) =>
          ((t.functionDeclarations ?? []) as Json[]).map((d) => d.parametersJsonSchema)
        ),
        (body.generationConfig as Json)?.responseJsonSchema,
      ];
    case "bedrock": {
      const config = (body.toolConfig ?? {}) as Json;
      return ((config.tools ?? []) as Json[]).map((t) =>
        ((t.toolSpec as Json)?.inputSchema as Json)?.json
      );
    }
  }
}

function toolNamesOf(kind: Kind, body: Json): string[] {
  const tools = Array.isArray(body.tools) ? body.tools as Json[] : [];
  switch (kind) {
    case "openai-chat":
      return tools.map((t) => String((t.function as Json).name));
    case "openai-responses":
      return tools.filter((t) => t.type === "function").map((t) => String(t.name));
    case "anthropic":
      return tools.filter((t) => t.type === undefined).map((t) => String(t.name));
    case "gemini":
      return tools.flatMap((t) =>
        ((t.functionDeclarations ?? []) as Json[]).map((d) => String(d.name))
      );
    case "bedrock":
      return (((body.toolConfig ?? {}) as Json).tools as Json[] ?? []).map((t) =>
        String((t.toolSpec as Json).name)
      );
  }
}

/** Roles each kind allows in its conversation, and whether turns must alternate. */
function assertConversation(kind: Kind, body: Json): void {
  if (kind === "openai-chat") {
    const roles = (body.messages as Json[]).map((m) => m.role);
    assert.ok(roles.every((r) => ["system", "user", "assistant", "tool"].includes(String(r))));
    return;
  }
  if (kind === "openai-responses") {
    for (const item of body.input as Json[]) {
      assert.ok(["message", "function_call", "function_call_output"].includes(String(item.type)));
    }
    return;
  }
  const turns = (kind === "gemini" ? body.contents : body.messages) as Json[];
  const allowed = kind === "gemini" ? ["user", "model"] : ["user", "assistant"];
  turns.forEach((t, i) => {
    assert.ok(allowed.includes(String(t.role)), `turn ${i} has role ${t.role}`);
    // Anthropic and Converse refuse two turns of one role in a row; Gemini takes them.
    if (kind !== "gemini" && i > 0) assert.notEqual(t.role, turns[i - 1]!.role, `turn ${i}`);
  });
  if (kind !== "gemini") assert.equal(turns[0]?.role, "user");
}

/** What every translated request must satisfy for its provider to accept it. */
function assertValidFor(kind: Kind, body: Json, sent: Captured): void {
  assertConversation(kind, body);
  for (const schema of schemasOf(kind, body)) {
    for (const type of schemaTypes(schema)) assert.equal(type, type.toLowerCase(), "schema type");
  }
  for (const name of toolNamesOf(kind, body)) assert.match(name, TOOL_NAME);
  if (kind === "anthropic") {
    assert.ok(!("temperature" in body && "top_p" in body), "temperature and top_p both sent");
    assert.equal(typeof body.max_tokens, "number");
    const asked = sent.body.max_tokens ?? sent.body.max_output_tokens ??
      (sent.body.generationConfig as Json | undefined)?.maxOutputTokens;
    // No small cap of the gateway's own when the agent set none.
    if (asked === undefined) assert.ok(Number(body.max_tokens) >= 32000);
  }
  if (kind === "bedrock") {
    const inference = (body.inferenceConfig ?? {}) as Json;
    assert.ok(
      !("temperature" in inference && "topP" in inference),
      "Claude on Bedrock: one of two",
    );
  }
  if (kind === "openai-chat") {
    assert.ok(!("max_tokens" in body), "OpenAI reasoning models refuse max_tokens");
    if ("parallel_tool_calls" in body) assert.ok(Array.isArray(body.tools));
  }
}

// ---------------------------------------------------------------- client checks

async function sseEvents(res: Response): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  for await (const e of res.body!.pipeThrough(new SseDecoderStream())) events.push(e);
  return events;
}

const data = (e: SseEvent): Json => JSON.parse(e.data ?? "{}");

/** The text and tool calls an agent read, each call as the agent's format names it. */
interface Heard {
  text: string;
  calls: Json[];
}

async function heard(agent: Agent, res: Response, streamed: boolean): Promise<Heard> {
  if (!streamed) return heardWhole(agent, await res.json());
  const events = (await sseEvents(res)).filter((e) => e.data !== undefined);
  if (agent === "claude_code") {
    assert.equal(events[0]?.event, "message_start");
    assert.equal(events.at(-1)?.event, "message_stop");
    let text = "";
    const calls: Json[] = [];
    for (const e of events) {
      const d = data(e);
      const block = d.content_block as Json | undefined;
      if (e.event === "content_block_start" && block?.type === "tool_use") {
        calls.push({ name: block.name });
      }
      const delta = d.delta as Json | undefined;
      if (delta?.type === "text_delta") text += String(delta.text);
    }
    return { text, calls };
  }
  if (agent === "codex") {
    assert.equal(events[0]?.event, "response.created");
    assert.equal(events.at(-1)?.event, "response.completed");
    const response = data(events.at(-1)!).response as Json;
    const done = events.filter((e) => e.event === "response.output_item.done")
      .map((e) => data(e).item as Json);
    // Each item's done event and the completed response agree.
    assert.deepEqual(response.output, done);
    return heardWhole(agent, response);
  }
  let text = "";
  const calls: Json[] = [];
  for (const e of events) {
    const parts = (((data(e).candidates as Json[])?.[0]?.content as Json)?.parts ?? []) as Json[];
    for (const p of parts) {
      if (typeof p.text === "string") text += p.text;
      if (isRecord(p.functionCall)) calls.push({ name: p.functionCall.name });
    }
  }
  return { text, calls };
}

function heardWhole(agent: Agent, body: Json): Heard {
  if (agent === "claude_code") {
    const content = body.content as Json[];
    return {
      text: content.filter((b) => b.type === "text").map((b) => b.text).join(""),
      calls: content.filter((b) => b.type === "tool_use").map((b) => ({ name: b.name })),
    };
  }
  if (agent === "codex") {
    const output = body.output as Json[];
    const text = output.filter((o) => o.type === "message")
      .flatMap((o) => (o.content as Json[]).map((c) => String(c.text ?? ""))).join("");
    const calls = output.filter((o) => o.type !== "message" && o.type !== "reasoning")
      .map((o) => {
        const { id: _id, call_id: _callId, status: _status, arguments: _args, ...rest } = o;
        return rest;
      });
    return { text, calls };
  }
  const parts = (((body.candidates as Json[])[0]!.content as Json).parts ?? []) as Json[];
  return {
    text: parts.map((p) => String(p.text ?? "")).join(""),
    calls: parts.filter((p) => isRecord(p.functionCall)).map((p) => ({
      name: (p.functionCall as Json).name,
    })),
  };
}

// ---------------------------------------------------------------- the matrix

async function sendThrough(
  kind: Kind,
  opts: { agent: Agent; captured: Captured; tool: { name: string; args: Json } | null },
) {
  const up = startFakeUpstream({ fallback: (call) => answer(kind, call, opts.tool) });
  const route = routeOf(opts.captured);
  const config: ConfigInput = {
    upstreams: [upstreamOf(kind, up.url)],
    routes: [{
      model: route,
      candidates: [{ upstream: "up", model: MODELS[kind] }],
      // Codex always sends web_search, which Chat and Bedrock have no equivalent for.
      drop_unsupported_tools: true,
    }],
  };
  const gw = await startTestGateway(config, {
    env: { AWS_AK: AWS.accessKeyId, AWS_SK: AWS.secretAccessKey },
  });
  try {
    const res = await fetch(`${gw.url}${opts.captured.path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(opts.captured.body),
    });
    const streamed = (res.headers.get("content-type") ?? "").includes("text/event-stream");
    const status = res.status;
    const got = status === 200 ? await heard(opts.agent, res, streamed) : await res.text();
    return { status, got, upstreamCalls: [...up.calls] };
  } finally {
    await gw.stop();
    await up.close();
  }
}

const KINDS: Kind[] = ["openai-chat", "openai-responses", "anthropic", "gemini", "bedrock"];

for (const agent of Object.keys(FIXTURES) as Agent[]) {
  for (const captured of FIXTURES[agent]) {
    for (const kind of KINDS) {
      const passthrough = OWN_KIND[agent] === kind;
      const expected = CALLS[`${agent}/${captured.name}`];
      Deno.test(`${agent} ${captured.name} → ${kind}${passthrough ? " (pass-through)" : ""}`, async () => {
        // A same-format upstream's bytes reach the agent unchanged: its own names are its business.
        const tool = expected && !passthrough ? { name: expected.call, args: expected.args } : null;
        const { status, got, upstreamCalls } = await sendThrough(kind, { agent, captured, tool });
        assert.equal(status, 200, typeof got === "string" ? got : "");
        assert.equal(upstreamCalls.length, 1);
        const sent = upstreamCalls[0]!.json as Json;
        if (passthrough) {
          // Gemini names the model in the URL; the others in the body, swapped for the candidate's.
          assert.deepEqual(
            sent,
            kind === "gemini" ? captured.body : { ...captured.body, model: MODELS[kind] },
          );
        } else {
          assertValidFor(kind, sent, captured);
          if (tool) assert.ok(toolNamesOf(kind, sent).includes(tool.name), `${tool.name} sent`);
        }
        assert.ok(typeof got !== "string");
        assert.equal(got.text, "Hi");
        assert.deepEqual(got.calls, tool && expected ? [expected.seen] : []);
      });
    }
  }
}

// ---------------------------------------------------------------- calls back to Codex

const codexRequest = (name: string) => FIXTURES.codex.find((c) => c.name === name)!;

Deno.test("codex, whole answer: a namespaced call comes back under its namespace", async () => {
  const captured = codexRequest("unknown_model_first_turn");
  const whole = { ...captured, body: { ...captured.body, stream: false } };
  const tool = { name: "mcp__notes__search_notes", args: { query: "milk" } };
  const { status, got } = await sendThrough("gemini", { agent: "codex", captured: whole, tool });
  assert.equal(status, 200);
  assert.ok(typeof got !== "string");
  assert.deepEqual(got.calls, [{
    type: "function_call",
    name: "search_notes",
    namespace: "mcp__notes",
  }]);
});

Deno.test("codex: a client tool search the upstream calls comes back as a tool_search_call", async () => {
  const captured = codexRequest("catalog_model_first_turn");
  const tool = { name: "tool_search", args: { query: "notes", limit: 3 } };
  const { status, got } = await sendThrough("anthropic", { agent: "codex", captured, tool });
  assert.equal(status, 200);
  assert.ok(typeof got !== "string");
  assert.deepEqual(got.calls, [{ type: "tool_search_call", execution: "client" }]);
});

Deno.test("codex: a free-form call streams its input as custom_tool_call_input events", async () => {
  const up = startFakeUpstream({
    fallback: (call) =>
      answer("openai-chat", call, { name: "apply_patch", args: { input: "*** Begin Patch\n" } }),
  });
  const captured = codexRequest("catalog_model_first_turn");
  const gw = await startTestGateway({
    upstreams: [upstreamOf("openai-chat", up.url)],
    routes: [{
      model: routeOf(captured),
      candidates: [{ upstream: "up", model: "gpt-5.5" }],
      drop_unsupported_tools: true,
    }],
  });
  try {
    const res = await fetch(`${gw.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(captured.body),
    });
    const events = await sseEvents(res);
    const types = events.map((e) => e.event);
    assert.ok(!types.includes("response.function_call_arguments.delta"));
    const done = events.find((e) => e.event === "response.custom_tool_call_input.done");
    assert.equal(data(done!).input, "*** Begin Patch\n");
    // What the chat upstream saw: a function with one string argument, the grammar in its description.
    const sent = up.calls[0]!.json as Json;
    const fn = (sent.tools as Json[]).map((t) => t.function as Json).find((f) =>
      f.name === "apply_patch"
    )!;
    assert.deepEqual((fn.parameters as Json).required, ["input"]);
    assert.match(String(fn.description), /lark grammar/);
    // Codex's web_search has no Chat equivalent and the route drops it.
    assert.ok(!(sent.tools as Json[]).some((t) => t.type !== "function"));
  } finally {
    await gw.stop();
    await up.close();
  }
});

// ---------------------------------------------------------------- skipped candidates

Deno.test("a candidate that cannot take a built-in tool is skipped unless the route drops it", async () => {
  const up = startFakeUpstream({ fallback: (call) => answer("openai-chat", call, null) });
  const captured = codexRequest("unknown_model_first_turn");
  const gw = await startTestGateway({
    upstreams: [upstreamOf("openai-chat", up.url)],
    routes: [{ model: routeOf(captured), candidates: [{ upstream: "up", model: "gpt-5.5" }] }],
  });
  try {
    const res = await fetch(`${gw.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(captured.body),
    });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.match(body.error.message, /built-in tool web_search/);
    assert.equal(body.error.code, "gw.client.unsupported");
    assert.equal(up.calls.length, 0);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("describeSkipped names each skipped upstream and why", () => {
  assert.equal(describeSkipped(new Map()), "");
  assert.equal(
    describeSkipped(new Map([["chat-up", ["built-in tool web_search"]]])),
    "skipped: chat-up: built-in tool web_search",
  );
  assert.equal(
    describeSkipped(
      new Map([
        ["chat-up", ["built-in tool web_search"]],
        ["bed-up", [
          "built-in tool web_search",
          "an image by URL (Bedrock takes images only inline)",
        ]],
      ]),
    ),
    "skipped: chat-up: built-in tool web_search; " +
      "bed-up: built-in tool web_search, an image by URL (Bedrock takes images only inline)",
  );
});

// ---------------------------------------------------------------- translation details

const turns: IrRequest = {
  model: "m",
  system: "Be brief.",
  messages: [
    { role: "user", content: [{ type: "text", text: "hi" }] },
    { role: "system", content: [{ type: "text", text: "The date is today." }] },
    { role: "assistant", content: [{ type: "text", text: "hello" }] },
    { role: "user", content: [{ type: "text", text: "bye" }] },
  ],
  stream: false,
};

Deno.test("a mid-conversation system turn: in place for Chat and Responses, folded elsewhere", () => {
  const chat = chatRequestBody(turns, "gpt-5.5").messages as Json[];
  assert.deepEqual(chat.map((m) => m.role), ["system", "user", "system", "assistant", "user"]);
  assert.equal(chat[2]!.content, "The date is today.");
  const responses = responsesRequestBody(turns, "gpt-5.5").input as Json[];
  assert.deepEqual(responses.map((i) => i.role), ["user", "system", "assistant", "user"]);
  const folded = "<system>\nThe date is today.\n</system>";
  const anthropic = anthropicRequestBody(turns, "claude-sonnet-4-5").messages as Json[];
  assert.deepEqual(anthropic[0], {
    role: "user",
    content: [{ type: "text", text: "hi" }, { type: "text", text: folded }],
  });
  assert.equal(anthropic.length, 3);
  const gemini = geminiRequestBody(turns).contents as Json[];
  assert.deepEqual(gemini.map((c) => c.role), ["user", "user", "model", "user"]);
  assert.deepEqual(gemini[1]!.parts, [{ text: folded }]);
  const converse = converseRequestBody(turns).messages as Json[];
  assert.deepEqual(converse.map((m) => m.role), ["user", "assistant", "user"]);
});

Deno.test("Chat's later system messages keep their place; leading ones are the system prompt", () => {
  const ir = parseChatRequest({
    model: "m",
    messages: [
      { role: "system", content: "a" },
      { role: "developer", content: "b" },
      { role: "user", content: "hi" },
      { role: "system", content: "c" },
    ],
  });
  assert.equal(ir.system, "a\n\nb");
  assert.deepEqual(ir.messages.at(-1), { role: "system", content: [{ type: "text", text: "c" }] });
});

Deno.test("Claude Code's system blocks with cache_control and its system turn are read", () => {
  const captured = FIXTURES.claude_code.find((c) => c.name === "first_turn")!;
  const ir = parseAnthropicRequest(captured.body);
  assert.equal(ir.nativeOnly, undefined);
  assert.match(ir.system ?? "", /You are a Claude agent/);
  assert.equal(ir.messages[1]?.role, "system");
  assert.match(JSON.stringify(ir.messages[1]?.content), /# Environment/);
});

Deno.test("Gemini's upper-case schema types are lower-cased, property names left alone", () => {
  const schema = {
    type: "OBJECT",
    properties: {
      type: { type: "STRING", enum: ["OBJECT"] },
      list: { type: "ARRAY", items: { type: "INTEGER" } },
      either: { anyOf: [{ type: "NUMBER" }, { type: ["STRING", "NULL"] }] },
    },
    $defs: { Thing: { type: "BOOLEAN" } },
  };
  assert.deepEqual(lowerCaseSchemaTypes(schema), {
    type: "object",
    properties: {
      type: { type: "string", enum: ["OBJECT"] },
      list: { type: "array", items: { type: "integer" } },
      either: { anyOf: [{ type: "number" }, { type: ["string", "null"] }] },
    },
    $defs: { Thing: { type: "boolean" } },
  });
});

Deno.test("Anthropic gets temperature alone when both are set; top_p when it is the only one", () => {
  const base: IrRequest = { ...turns, temperature: 1, topP: 0.95 };
  const both = anthropicRequestBody(base, "claude-sonnet-4-5");
  assert.equal(both.temperature, 1);
  assert.equal("top_p" in both, false);
  const onlyTopP = anthropicRequestBody({ ...base, temperature: undefined }, "claude-sonnet-4-5");
  assert.equal(onlyTopP.top_p, 0.95);
  const claude = converseRequestBody(base, "anthropic.claude-sonnet-4-5-v1:0");
  assert.deepEqual(claude.inferenceConfig, { temperature: 1 });
  const nova = converseRequestBody(base, "amazon.nova-pro-v1:0");
  assert.deepEqual(nova.inferenceConfig, { temperature: 1, topP: 0.95 });
});

Deno.test("Chat: max_completion_tokens for OpenAI and reasoning models, max_tokens elsewhere", () => {
  const openai = { id: "u", kind: "openai-chat" as const, max_in_flight: 1, enabled: true };
  const local = { ...openai, base_url: "http://127.0.0.1:8000/v1" };
  assert.equal(maxTokensField(openai, "gpt-4o"), "max_completion_tokens");
  assert.equal(
    maxTokensField({ ...openai, base_url: "https://x.openai.azure.com/openai/v1" }, "gpt-4o"),
    "max_completion_tokens",
  );
  assert.equal(maxTokensField(local, "o3-mini"), "max_completion_tokens");
  assert.equal(maxTokensField(local, "gpt-5.5"), "max_completion_tokens");
  assert.equal(maxTokensField(local, "llama-3.3-70b"), "max_tokens");
  const body = chatRequestBody({ ...turns, maxTokens: 100 }, "o3", {
    tokenField: "max_completion_tokens",
  });
  assert.equal(body.max_completion_tokens, 100);
  assert.equal("max_tokens" in body, false);
});

Deno.test("parallel_tool_calls false is carried: Chat, Responses and Anthropic's disable_parallel_tool_use", () => {
  const ir: IrRequest = {
    ...turns,
    tools: [{ name: "f", parameters: { type: "object" } }],
    parallelToolCalls: false,
  };
  assert.equal(chatRequestBody(ir, "gpt-5.5").parallel_tool_calls, false);
  assert.equal(responsesRequestBody(ir, "gpt-5.5").parallel_tool_calls, false);
  assert.deepEqual(anthropicRequestBody(ir, "claude-sonnet-4-5").tool_choice, {
    type: "auto",
    disable_parallel_tool_use: true,
  });
  assert.deepEqual(
    anthropicRequestBody({ ...ir, toolChoice: "required" }, "claude-sonnet-4-5").tool_choice,
    { type: "any", disable_parallel_tool_use: true },
  );
  // Without tools OpenAI refuses the field; Anthropic has nothing to disable.
  const bare = { ...turns, parallelToolCalls: false };
  assert.equal("parallel_tool_calls" in chatRequestBody(bare, "gpt-5.5"), false);
  assert.equal("tool_choice" in anthropicRequestBody(bare, "claude-sonnet-4-5"), false);
  // Codex's Responses Lite request says false; an Anthropic client says it in tool_choice.
  const lite = parseAnthropicRequest({
    model: "m",
    max_tokens: 5,
    messages: [{ role: "user", content: "hi" }],
    tool_choice: { type: "auto", disable_parallel_tool_use: true },
  });
  assert.equal(lite.parallelToolCalls, false);
});

Deno.test("web search maps to each kind's own search tool", () => {
  const ir: IrRequest = { ...turns, builtinTools: [{ type: "web_search", param: "tools[0]" }] };
  assert.deepEqual(anthropicRequestBody(ir, "claude-sonnet-4-5").tools, [
    { type: "web_search_20250305", name: "web_search" },
  ]);
  assert.deepEqual(geminiRequestBody(ir).tools, [{ googleSearch: {} }]);
  assert.deepEqual(responsesRequestBody(ir, "gpt-5.5").tools, [{ type: "web_search" }]);
});

Deno.test("namespaced names: Codex's flat MCP names, shortened with a hash when too long", () => {
  assert.equal(flatToolName("mcp__notes", "search_notes"), "mcp__notes__search_notes");
  assert.equal(flatToolName("mcp__notes__", "search_notes"), "mcp__notes__search_notes");
  assert.equal(flatToolName(undefined, "exec_command"), "exec_command");
  const long = flatToolName("a".repeat(50), "b".repeat(30));
  assert.match(long, TOOL_NAME);
  assert.notEqual(long, flatToolName("a".repeat(50), "c".repeat(30)));
  assert.match(flatToolName("my.server", "do it"), TOOL_NAME);
});
