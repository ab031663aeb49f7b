import { boundedModel } from "../bounded_names.ts";
import { toolArguments } from "../json_guard.ts";
import { supportsBuiltin } from "../builtin_tools.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { appendAll } from "../../runtime/append_all.ts";
import {
  DEFAULT_RESPONSE_FORMAT_NAME,
  type IrBuiltinTool,
  type IrCacheMark,
  type IrMessage,
  type IrNativeFeature,
  type IrPart,
  type IrRequest,
  type IrResponseFormat,
  type IrSystemBlock,
  type IrThinking,
  type IrTool,
  type IrToolChoice,
} from "../ir.ts";
import {
  optionalBoolean,
  optionalNumber,
  optionalString,
  optionalStringList,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { anthropicUserSession } from "../session_ids.ts";
import { isRecord } from "../../runtime/json.ts";
import { type ConversationTurn, foldSystemTurns } from "../system_turns.ts";

/**
 * Anthropic requires `max_tokens`; the other formats make it optional, and a
 * client that leaves it out means "as long as the model likes" (Codex never
 * sends one). So the default is the model family's documented output limit,
 * not a small number that would cut agents' answers short: 32000 for a name
 * not listed (every Claude model since Opus 4 takes that much).
 */
const MAX_OUTPUT_BY_FAMILY: [RegExp, number][] = [
  [/claude-(?:opus|sonnet)-4-[6-9]/, 128000],
  [/claude-opus-4(?:-0|-1|-2025|@)/, 32000],
  [/claude-(?:opus|sonnet|haiku)-4/, 64000],
  [/claude-3-7-/, 64000],
  [/claude-3-5-/, 8192],
  [/claude-3-(?:opus|sonnet|haiku)/, 4096],
];
export const FALLBACK_MAX_TOKENS = 32000;

/** The `max_tokens` sent when the client gave none. */
export function defaultMaxTokens(model: string): number {
  return MAX_OUTPUT_BY_FAMILY.find(([family]) => family.test(model))?.[1] ?? FALLBACK_MAX_TOKENS;
}

type Role = ConversationTurn["role"];

/** Where parsed input lands: system text, turns, and what only Anthropic can take. */
interface Into {
  system: string[];
  /** The system prompt's blocks, with their cache marks (`IrRequest.systemBlocks`). */
  systemBlocks: IrSystemBlock[];
  out: IrMessage[];
  native: IrNativeFeature[];
  builtins: IrBuiltinTool[];
}

/**
 * Reads a Messages body into the gateway's request.
 *
 * Hints the IR has no slot for and that only tune the answer (`top_k`,
 * `service_tier`, `output_config.effort`, `context_management`,
 * `defer_loading`) are carried by same-format pass-through and left out of
 * translations. `cache_control` marks (on system blocks, content blocks, tools
 * and the request) and `thinking` are kept, for Bedrock's Claude and for a
 * resumed hop (docs/observability.md "Where the cache is carried"). A system message after the
 * first turn is a system turn; the web search server tool a built-in other
 * kinds may map. Content the IR cannot carry (documents, other server tools,
 * redacted thinking, MCP servers, non-text tool results, ...) is recorded in
 * `nativeOnly`: an Anthropic upstream gets the body as is, any other
 * candidate is skipped. Wrong types are refused here.
 */
export function parseAnthropicRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  const model = boundedModel(requireString(b.model, "model"));
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const into: Into = { system: [], systemBlocks: [], out: [], native: [], builtins: [] };
  if (b.mcp_servers !== undefined && b.mcp_servers !== null) {
    if (requireArray(b.mcp_servers, "mcp_servers").length) {
      into.native.push({ param: "mcp_servers", what: "MCP servers ('mcp_servers')" });
    }
  }
  appendAll(into.system, readSystem(b.system, into));
  requireArray(b.messages, "messages").forEach((m, i) => readMessage(m, `messages[${i}]`, into));
  const metadata = b.metadata === undefined || b.metadata === null
    ? {}
    : requireRecord(b.metadata, "metadata");
  const cache = readCacheMark(b.cache_control, "cache_control");
  const thinking = readThinking(b.thinking);
  return {
    model,
    system: into.system.length ? into.system.join("\n\n") : undefined,
    ...(into.systemBlocks.some((block) => block.cache) ? { systemBlocks: into.systemBlocks } : {}),
    ...(cache ? { cache } : {}),
    ...(thinking ? { thinking } : {}),
    messages: into.out,
    tools: readTools(b.tools, into),
    ...(into.builtins.length ? { builtinTools: into.builtins } : {}),
    toolChoice: readToolChoice(b.tool_choice),
    ...readParallel(b.tool_choice),
    maxTokens: optionalNumber(b.max_tokens, "max_tokens"),
    temperature: optionalNumber(b.temperature, "temperature"),
    topP: optionalNumber(b.top_p, "top_p"),
    stop: optionalStringList(b.stop_sequences, "stop_sequences"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    responseFormat: readOutputFormat(b.output_config, into),
    sessionHint: anthropicUserSession(optionalString(metadata.user_id, "metadata.user_id")),
    ...(into.native.length ? { nativeOnly: into.native } : {}),
  };
}

/**
 * `output_config.format` is `{type: "json_schema", schema}` (structured
 * outputs); a type this gateway does not know is left to Anthropic itself.
 */
function readOutputFormat(value: unknown, into: Into): IrResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  const config = requireRecord(value, "output_config");
  if (config.format === undefined || config.format === null) return undefined;
  const format = requireRecord(config.format, "output_config.format");
  const type = requireString(format.type, "output_config.format.type");
  if (type !== "json_schema") {
    into.native.push({
      param: "output_config.format.type",
      what: `output format '${type}' ('output_config.format')`,
    });
    return undefined;
  }
  return {
    type: "json_schema",
    name: DEFAULT_RESPONSE_FORMAT_NAME,
    schema: requireRecord(format.schema, "output_config.format.schema"),
  };
}

/**
 * A cache breakpoint: Anthropic's `{type: "ephemeral", ttl?: "5m" | "1h"}`. Anthropic itself
 * refuses a malformed one; here only its lifetime is read.
 */
function readCacheMark(value: unknown, param: string): IrCacheMark | undefined {
  if (value === undefined || value === null) return undefined;
  const mark = requireRecord(value, param);
  const ttl = optionalString(mark.ttl, `${param}.ttl`);
  return ttl === "5m" || ttl === "1h" ? { ttl } : {};
}

/**
 * `thinking` as the IR carries it for Claude on Bedrock: enabled with its budget, adaptive or
 * disabled; another shape is Anthropic's alone and stays with pass-through.
 */
function readThinking(value: unknown): IrThinking | undefined {
  if (value === undefined || value === null) return undefined;
  const thinking = requireRecord(value, "thinking");
  const type = requireString(thinking.type, "thinking.type");
  if (type === "adaptive" || type === "disabled") return { type };
  if (type !== "enabled") return undefined;
  const budgetTokens = optionalNumber(thinking.budget_tokens, "thinking.budget_tokens");
  return budgetTokens === undefined ? undefined : { type, budgetTokens };
}

function readSystem(value: unknown, into: Into): string[] {
  if (value === undefined || value === null) return [];
  if (typeof value === "string") {
    if (value === "") return [];
    into.systemBlocks.push({ text: value });
    return [value];
  }
  return [textBlocks(value, { param: "system", into, system: true })];
}

/**
 * Text of a list of text blocks, as `system` and tool results carry them.
 * Any other block (an image or document in a tool result) is Anthropic's alone.
 */
function textBlocks(
  value: unknown,
  opts: { param: string; into: Into; system?: boolean },
): string {
  const { param, into } = opts;
  return requireArray(value, param).flatMap((b, i) => {
    const block = requireRecord(b, `${param}[${i}]`);
    const type = requireString(block.type, `${param}[${i}].type`);
    if (type !== "text") {
      into.native.push({ param: `${param}[${i}].type`, what: `a '${type}' block in '${param}'` });
      return [];
    }
    const text = requireString(block.text, `${param}[${i}].text`);
    if (opts.system) {
      const cache = readCacheMark(block.cache_control, `${param}[${i}].cache_control`);
      into.systemBlocks.push(cache ? { text, cache } : { text });
    }
    return [text];
  }).join("\n");
}

function readMessage(value: unknown, param: string, into: Into): void {
  const m = requireRecord(value, param);
  const role = requireString(m.role, `${param}.role`);
  if (role === "system") {
    // Claude Code sends one after the first user turn on every request.
    if (!into.out.length) {
      into.system.push(readSystem(m.content, into).join("\n"));
      return;
    }
    // Mid-conversation: a system turn, its blocks not part of the system prompt.
    const text = readSystem(m.content, { ...into, systemBlocks: [] }).join("\n");
    if (text) into.out.push({ role: "system", content: [{ type: "text", text }] });
  } else if (role === "user" || role === "assistant") {
    into.out.push({
      role,
      content: readContent(m.content, { param: `${param}.content`, role, into }),
    });
  } else {
    throw clientError(`'${param}.role' must be user or assistant`, { param: `${param}.role` });
  }
}

interface BlockOpts {
  param: string;
  role: Role;
  into: Into;
}

function readContent(content: unknown, opts: BlockOpts): IrPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return requireArray(content, opts.param).flatMap((b, i) => {
    const param = `${opts.param}[${i}]`;
    const block = requireRecord(b, param);
    const part = readBlock(block, { ...opts, param });
    if (!part) return [];
    const cache = readCacheMark(block.cache_control, `${param}.cache_control`);
    return [cache ? { ...part, cache } : part];
  });
}

/** A block as an IR part, or null when only Anthropic can take it (recorded in `nativeOnly`). */
function readBlock(block: Record<string, unknown>, opts: BlockOpts): IrPart | null {
  const { param, role, into } = opts;
  const type = requireString(block.type, `${param}.type`);
  switch (type) {
    case "text":
      return { type: "text", text: requireString(block.text, `${param}.text`) };
    case "image":
      return readImage(block.source, { param: `${param}.source`, into });
    case "thinking":
      return {
        type: "reasoning",
        text: requireString(block.thinking, `${param}.thinking`),
        signature: optionalString(block.signature, `${param}.signature`),
      };
    case "tool_use":
      requireRole(role, { expected: "assistant", param });
      return {
        type: "tool_call",
        id: requireString(block.id, `${param}.id`),
        name: requireString(block.name, `${param}.name`),
        arguments: JSON.stringify(block.input ?? {}),
      };
    case "tool_result":
      requireRole(role, { expected: "user", param });
      return readToolResult(block, { param, into });
    default:
      // document, redacted_thinking, server_tool_use, search_result, ...
      into.native.push({ param: `${param}.type`, what: `a '${type}' content block` });
      return null;
  }
}

function requireRole(role: Role, opts: { expected: Role; param: string }): void {
  if (role !== opts.expected) {
    throw clientError(`'${opts.param}' may only appear in a ${opts.expected} message`, {
      param: `${opts.param}.type`,
    });
  }
}

function readImage(value: unknown, opts: { param: string; into: Into }): IrPart | null {
  const { param } = opts;
  const source = requireRecord(value, param);
  const type = requireString(source.type, `${param}.type`);
  if (type === "base64") {
    return {
      type: "image",
      mediaType: requireString(source.media_type, `${param}.media_type`),
      data: requireString(source.data, `${param}.data`),
    };
  }
  if (type === "url") {
    return { type: "image_url", url: requireString(source.url, `${param}.url`) };
  }
  // A `file` source names an upload in Anthropic's Files API, which no other provider can read.
  opts.into.native.push({ param: `${param}.type`, what: `an image with source type '${type}'` });
  return null;
}

function readToolResult(
  block: Record<string, unknown>,
  opts: { param: string; into: Into },
): IrPart {
  const { param } = opts;
  const content = block.content === undefined || block.content === null
    ? ""
    : typeof block.content === "string"
    ? block.content
    : textBlocks(block.content, { param: `${param}.content`, into: opts.into });
  return {
    type: "tool_result",
    toolCallId: requireString(block.tool_use_id, `${param}.tool_use_id`),
    content,
    isError: optionalBoolean(block.is_error, `${param}.is_error`),
  };
}

function readTools(value: unknown, into: Into): IrTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").flatMap((t, i) => {
    const tool = requireRecord(t, `tools[${i}]`);
    // Client tools have no type or "custom"; any other type is a server tool run by Anthropic.
    if (tool.type !== undefined && tool.type !== null && tool.type !== "custom") {
      const type = requireString(tool.type, `tools[${i}].type`);
      if (type.startsWith("web_search_")) {
        into.builtins.push({ type: "web_search", param: `tools[${i}]` });
      } else into.native.push({ param: `tools[${i}].type`, what: `server tool '${type}'` });
      return [];
    }
    const cache = readCacheMark(tool.cache_control, `tools[${i}].cache_control`);
    return [{
      name: requireString(tool.name, `tools[${i}].name`),
      description: optionalString(tool.description, `tools[${i}].description`),
      parameters: isRecord(tool.input_schema)
        ? tool.input_schema
        : { type: "object", properties: {} },
      ...(cache ? { cache } : {}),
    }];
  });
}

/** `tool_choice.disable_parallel_tool_use: true` is OpenAI's `parallel_tool_calls: false`. */
function readParallel(value: unknown): { parallelToolCalls?: boolean } {
  if (!isRecord(value)) return {};
  const off = optionalBoolean(
    value.disable_parallel_tool_use,
    "tool_choice.disable_parallel_tool_use",
  );
  return off === undefined ? {} : { parallelToolCalls: !off };
}

function readToolChoice(value: unknown): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  const choice = requireRecord(value, "tool_choice");
  switch (choice.type) {
    case "auto":
    case "none":
      return choice.type;
    case "any":
      return "required";
    case "tool":
      return { name: requireString(choice.name, "tool_choice.name") };
    default:
      throw clientError("'tool_choice.type' must be auto, any, tool or none", {
        param: "tool_choice.type",
      });
  }
}

/**
 * What of a translated request a Messages body cannot say. Structured output
 * takes a schema only: "any JSON object" has no Anthropic form.
 */
export function unsupportedFor(ir: IrRequest): string[] {
  return ir.responseFormat?.type === "json_object"
    ? ["JSON mode without a schema (response format 'json_object')"]
    : [];
}

/** Writes the gateway's request as a Messages body for `model`. */
export function anthropicRequestBody(ir: IrRequest, model: string): Record<string, unknown> {
  const refused = unsupportedFor(ir);
  if (refused.length) {
    throw clientError(`an Anthropic upstream cannot take ${refused.join("; ")}`, {
      code: "gw.client.unsupported",
    });
  }
  const body: Record<string, unknown> = {
    model,
    max_tokens: ir.maxTokens ?? defaultMaxTokens(model),
    messages: anthropicMessages(foldSystemTurns(ir.messages)),
  };
  if (ir.systemBlocks?.length) body.system = ir.systemBlocks.map(systemBlock);
  else if (ir.system) body.system = ir.system;
  if (ir.cache) body.cache_control = cacheControl(ir.cache);
  if (ir.thinking) body.thinking = anthropicThinking(ir.thinking);
  const tools = anthropicTools(ir);
  if (tools.length) body.tools = tools;
  const choice = anthropicToolChoice(ir, tools.length > 0);
  if (choice) body.tool_choice = choice;
  // Current Claude models refuse both ("cannot both be specified"); temperature
  // is the knob every format has and the one clients mean to turn.
  if (ir.temperature !== undefined) body.temperature = ir.temperature;
  else if (ir.topP !== undefined) body.top_p = ir.topP;
  if (ir.stop?.length) body.stop_sequences = ir.stop;
  if (ir.stream) body.stream = true;
  if (ir.responseFormat?.type === "json_schema") {
    // Anthropic always holds the answer to the schema and has no name for it: name and strict go.
    body.output_config = { format: { type: "json_schema", schema: ir.responseFormat.schema } };
  }
  return body;
}

/** A cache mark as Anthropic's `cache_control`. */
export function cacheControl(mark: IrCacheMark): Record<string, unknown> {
  return mark.ttl ? { type: "ephemeral", ttl: mark.ttl } : { type: "ephemeral" };
}

function withCache(block: Record<string, unknown>, mark: IrCacheMark | undefined) {
  return mark ? { ...block, cache_control: cacheControl(mark) } : block;
}

function systemBlock(block: IrSystemBlock): Record<string, unknown> {
  return withCache({ type: "text", text: block.text }, block.cache);
}

function anthropicThinking(thinking: IrThinking): Record<string, unknown> {
  return thinking.type === "enabled"
    ? { type: "enabled", budget_tokens: thinking.budgetTokens }
    : { type: thinking.type };
}

function anthropicTools(ir: IrRequest): Record<string, unknown>[] {
  const tools: Record<string, unknown>[] = (ir.tools ?? []).map((t) =>
    withCache({
      name: t.name,
      ...(t.description === undefined ? {} : { description: t.description }),
      input_schema: t.parameters,
    }, t.cache)
  );
  // Built-ins Anthropic lacks were dropped by the route's choice (the engine skips the candidate otherwise).
  if (ir.builtinTools?.some((t) => supportsBuiltin("anthropic", t))) {
    tools.push({ type: "web_search_20250305", name: "web_search" });
  }
  return tools;
}

/**
 * `parallel_tool_calls: false` is Anthropic's `disable_parallel_tool_use`,
 * which lives in `tool_choice` (auto when the client chose none) and means
 * nothing with `none` or without tools.
 */
function anthropicToolChoice(
  ir: IrRequest,
  hasTools: boolean,
): Record<string, unknown> | undefined {
  const choice = ir.toolChoice;
  const base = choice === undefined
    ? undefined
    : choice === "required"
    ? { type: "any" }
    : typeof choice === "string"
    ? { type: choice }
    : { type: "tool", name: choice.name };
  if (ir.parallelToolCalls !== false || !hasTools || choice === "none") return base;
  return { ...(base ?? { type: "auto" }), disable_parallel_tool_use: true };
}

/**
 * Anthropic wants alternating turns, tool results at the head of their user
 * turn and no empty turns; other formats allow all three, so turns are merged
 * and ordered here.
 */
function anthropicMessages(messages: ConversationTurn[]): Record<string, unknown>[] {
  const out: { role: Role; content: Record<string, unknown>[] }[] = [];
  messages.forEach((m, i) => {
    const blocks = m.content.flatMap((p, j) =>
      anthropicBlocks(p, `messages[${i}].content[${j}]`).map((b) => withCache(b, p.cache))
    );
    if (!blocks.length) return;
    const last = out.at(-1);
    if (last?.role === m.role) appendAll(last.content, blocks);
    else out.push({ role: m.role, content: blocks });
  });
  for (const m of out) {
    if (m.role === "user") m.content = toolResultsFirst(m.content);
  }
  return out;
}

function toolResultsFirst(blocks: Record<string, unknown>[]): Record<string, unknown>[] {
  const results = blocks.filter((b) => b.type === "tool_result");
  return results.length ? [...results, ...blocks.filter((b) => b.type !== "tool_result")] : blocks;
}

function anthropicBlocks(p: IrPart, param: string): Record<string, unknown>[] {
  switch (p.type) {
    case "text":
    case "refusal":
      // Anthropic rejects empty text blocks.
      return p.text === "" ? [] : [{ type: "text", text: p.text }];
    case "image":
      return [{ type: "image", source: { type: "base64", media_type: p.mediaType, data: p.data } }];
    case "image_url":
      return [{ type: "image", source: { type: "url", url: p.url } }];
    case "reasoning":
      // Anthropic accepts only thinking it signed itself; another provider's
      // reasoning cannot be replayed and is not needed to continue the turn.
      return p.signature ? [{ type: "thinking", thinking: p.text, signature: p.signature }] : [];
    case "tool_call":
      return [{
        type: "tool_use",
        id: toolUseId(p.id),
        name: p.name,
        input: toolArguments(p, `${param}.arguments`),
      }];
    case "tool_result":
      return [{
        type: "tool_result",
        tool_use_id: toolUseId(p.toolCallId),
        ...(p.content === "" ? {} : { content: p.content }),
        ...(p.isError ? { is_error: true } : {}),
      }];
  }
}

/**
 * Anthropic ids must match ^[a-zA-Z0-9_-]+$; other providers' ids may not.
 * The mapping is applied to calls and results alike, so pairs still match.
 */
function toolUseId(id: string): string {
  return id.replace(/[^a-zA-Z0-9_-]/g, "_") || "toolu_unnamed";
}
