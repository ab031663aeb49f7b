import { clientError } from "../gateway_error.ts";
import type { IrMessage, IrPart, IrRequest, IrTool, IrToolChoice } from "../ir.ts";
import {
  argumentsObject,
  optionalBoolean,
  optionalNumber,
  optionalString,
  optionalStringList,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { isRecord } from "../sse_frames.ts";

/**
 * Anthropic requires `max_tokens`; formats that make it optional leave it to
 * us. 4096 is what every current Claude model accepts and long enough for a
 * typical chat turn; a client that needs more says so.
 */
export const DEFAULT_MAX_TOKENS = 4096;

type Role = IrMessage["role"];

/**
 * Reads a Messages body into the gateway's request.
 *
 * Hints the IR has no slot for and that only tune the answer (`thinking`,
 * `top_k`, `cache_control`, `service_tier`, `tool_choice.disable_parallel_tool_use`)
 * are carried by same-format pass-through and left out of translations.
 * Content the IR cannot carry (documents, server tools, redacted thinking,
 * MCP servers, structured output) is refused: a translation would drop it.
 */
export function parseAnthropicRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  const model = requireString(b.model, "model");
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  refuseUntranslatable(b);
  const system = readSystem(b.system);
  const out: IrMessage[] = [];
  requireArray(b.messages, "messages").forEach((m, i) =>
    readMessage(m, `messages[${i}]`, { system, out })
  );
  const metadata = b.metadata === undefined || b.metadata === null
    ? {}
    : requireRecord(b.metadata, "metadata");
  return {
    model,
    system: system.length ? system.join("\n\n") : undefined,
    messages: out,
    tools: readTools(b.tools),
    toolChoice: readToolChoice(b.tool_choice),
    maxTokens: optionalNumber(b.max_tokens, "max_tokens"),
    temperature: optionalNumber(b.temperature, "temperature"),
    topP: optionalNumber(b.top_p, "top_p"),
    stop: optionalStringList(b.stop_sequences, "stop_sequences"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    sessionHint: optionalString(metadata.user_id, "metadata.user_id"),
  };
}

function unsupported(what: string, param: string): never {
  throw clientError(`${what} is not supported by this gateway`, {
    param,
    code: "gw.client.unsupported",
  });
}

function refuseUntranslatable(b: Record<string, unknown>): void {
  if (Array.isArray(b.mcp_servers) && b.mcp_servers.length) {
    unsupported("'mcp_servers'", "mcp_servers");
  }
  if (isRecord(b.output_config) && b.output_config.format != null) {
    unsupported("'output_config.format' (structured output)", "output_config.format");
  }
}

function readSystem(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (typeof value === "string") return value === "" ? [] : [value];
  return [textBlocks(value, "system")];
}

/** Text of a list of text blocks, as `system` and tool results carry them. */
function textBlocks(value: unknown, param: string): string {
  return requireArray(value, param).map((b, i) => {
    const block = requireRecord(b, `${param}[${i}]`);
    if (block.type !== "text") {
      unsupported(`a '${String(block.type)}' block in '${param}'`, `${param}[${i}].type`);
    }
    return requireString(block.text, `${param}[${i}].text`);
  }).join("\n");
}

function readMessage(
  value: unknown,
  param: string,
  into: { system: string[]; out: IrMessage[] },
): void {
  const m = requireRecord(value, param);
  const role = requireString(m.role, `${param}.role`);
  if (role === "system") {
    // The IR has one system prompt: a system turn can only lead the conversation.
    if (into.out.length) unsupported("a 'system' message after the conversation began", param);
    into.system.push(readSystem(m.content).join("\n"));
  } else if (role === "user" || role === "assistant") {
    into.out.push({ role, content: readContent(m.content, { param: `${param}.content`, role }) });
  } else {
    throw clientError(`'${param}.role' must be user or assistant`, { param: `${param}.role` });
  }
}

function readContent(content: unknown, opts: { param: string; role: Role }): IrPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return requireArray(content, opts.param).map((b, i) =>
    readBlock(requireRecord(b, `${opts.param}[${i}]`), {
      param: `${opts.param}[${i}]`,
      role: opts.role,
    })
  );
}

function readBlock(block: Record<string, unknown>, opts: { param: string; role: Role }): IrPart {
  const { param, role } = opts;
  switch (block.type) {
    case "text":
      return { type: "text", text: requireString(block.text, `${param}.text`) };
    case "image":
      return readImage(block.source, `${param}.source`);
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
      return readToolResult(block, param);
    default:
      return unsupported(`content block type '${String(block.type)}'`, `${param}.type`);
  }
}

function requireRole(role: Role, opts: { expected: Role; param: string }): void {
  if (role !== opts.expected) {
    throw clientError(`'${opts.param}' may only appear in a ${opts.expected} message`, {
      param: `${opts.param}.type`,
    });
  }
}

function readImage(value: unknown, param: string): IrPart {
  const source = requireRecord(value, param);
  if (source.type === "base64") {
    return {
      type: "image",
      mediaType: requireString(source.media_type, `${param}.media_type`),
      data: requireString(source.data, `${param}.data`),
    };
  }
  if (source.type === "url") {
    return { type: "image_url", url: requireString(source.url, `${param}.url`) };
  }
  return unsupported(`image source type '${String(source.type)}'`, `${param}.type`);
}

function readToolResult(block: Record<string, unknown>, param: string): IrPart {
  const content = block.content === undefined || block.content === null
    ? ""
    : typeof block.content === "string"
    ? block.content
    : textBlocks(block.content, `${param}.content`);
  return {
    type: "tool_result",
    toolCallId: requireString(block.tool_use_id, `${param}.tool_use_id`),
    content,
    isError: optionalBoolean(block.is_error, `${param}.is_error`),
  };
}

function readTools(value: unknown): IrTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").map((t, i) => {
    const tool = requireRecord(t, `tools[${i}]`);
    // Client tools have no type or "custom"; any other type is a server tool run by Anthropic.
    if (tool.type !== undefined && tool.type !== null && tool.type !== "custom") {
      unsupported(`server tool '${String(tool.type)}'`, `tools[${i}].type`);
    }
    return {
      name: requireString(tool.name, `tools[${i}].name`),
      description: optionalString(tool.description, `tools[${i}].description`),
      parameters: isRecord(tool.input_schema)
        ? tool.input_schema
        : { type: "object", properties: {} },
    };
  });
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

/** Writes the gateway's request as a Messages body for `model`. */
export function anthropicRequestBody(ir: IrRequest, model: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    max_tokens: ir.maxTokens ?? DEFAULT_MAX_TOKENS,
    messages: anthropicMessages(ir.messages),
  };
  if (ir.system) body.system = ir.system;
  if (ir.tools?.length) {
    body.tools = ir.tools.map((t) => ({
      name: t.name,
      ...(t.description === undefined ? {} : { description: t.description }),
      input_schema: t.parameters,
    }));
  }
  if (ir.toolChoice !== undefined) body.tool_choice = anthropicToolChoice(ir.toolChoice);
  if (ir.temperature !== undefined) body.temperature = ir.temperature;
  if (ir.topP !== undefined) body.top_p = ir.topP;
  if (ir.stop?.length) body.stop_sequences = ir.stop;
  if (ir.stream) body.stream = true;
  return body;
}

function anthropicToolChoice(choice: IrToolChoice): Record<string, unknown> {
  if (choice === "required") return { type: "any" };
  if (typeof choice === "string") return { type: choice };
  return { type: "tool", name: choice.name };
}

/**
 * Anthropic wants alternating turns, tool results at the head of their user
 * turn and no empty turns; other formats allow all three, so turns are merged
 * and ordered here.
 */
function anthropicMessages(messages: IrMessage[]): Record<string, unknown>[] {
  const out: { role: Role; content: Record<string, unknown>[] }[] = [];
  messages.forEach((m, i) => {
    const blocks = m.content.flatMap((p, j) => anthropicBlocks(p, `messages[${i}].content[${j}]`));
    if (!blocks.length) return;
    const last = out.at(-1);
    if (last?.role === m.role) last.content.push(...blocks);
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
        input: argumentsObject(p.arguments, `${param}.arguments`),
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
