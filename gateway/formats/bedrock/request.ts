import { clientError } from "../../runtime/gateway_error.ts";
import { appendAll } from "../../runtime/append_all.ts";
import { withoutTrailingSlashes } from "../../config/trailing_slashes.ts";
import type {
  IrCacheMark,
  IrPart,
  IrRequest,
  IrResponseFormat,
  IrThinking,
  IrToolChoice,
} from "../ir.ts";
import { toolArguments } from "../json_guard.ts";
import { echoed } from "../bounded_names.ts";
import { type ConversationTurn, foldSystemTurns } from "../system_turns.ts";

type Block = Record<string, unknown>;

interface ConverseMessage {
  role: "user" | "assistant";
  content: Block[];
}

/** `{base}/model/{modelId}/converse[-stream]`; ids such as `...-v1:0` or ARNs are one path segment. */
export function converseUrl(base: string, opts: { model: string; stream: boolean }): string {
  const action = opts.stream ? "converse-stream" : "converse";
  return `${withoutTrailingSlashes(base)}/model/${encodeURIComponent(opts.model)}/${action}`;
}

/**
 * What of a request Converse cannot say: images by URL or of other types than
 * png/jpeg/gif/webp, `tool_choice` none while tools are given (Converse has no
 * "none"; sending the tools would let the model call one), and JSON mode
 * without a schema.
 */
export function unsupportedFor(ir: IrRequest): string[] {
  const out = new Set<string>();
  for (const m of ir.messages) {
    for (const p of m.content) {
      if (p.type === "image_url") out.add("an image by URL (Bedrock takes images only inline)");
      if (p.type === "image" && !imageFormats[p.mediaType.toLowerCase()]) {
        out.add(`an image of type '${p.mediaType}' (Bedrock takes png, jpeg, gif or webp)`);
      }
    }
  }
  if (ir.toolChoice === "none" && ir.tools?.length) out.add("tool_choice 'none' with tools");
  if (ir.responseFormat?.type === "json_object") {
    out.add("JSON mode without a schema (response format 'json_object')");
  }
  return [...out];
}

/**
 * Writes the gateway's request as a Converse / ConverseStream body (the model
 * goes in the URL, and decides sampling rules: see `inferenceConfig`).
 */
export function converseRequestBody(ir: IrRequest, model = ""): Record<string, unknown> {
  const refused = unsupportedFor(ir);
  if (refused.length) {
    throw clientError(`a Bedrock upstream cannot take ${refused.join("; ")}`, {
      code: "gw.client.unsupported",
    });
  }
  const caches = cachesPrompts(model);
  const body: Record<string, unknown> = {
    messages: converseMessages(foldSystemTurns(ir.messages), { caches }),
  };
  const system = systemBlocks(ir, { caches });
  if (system.length) body.system = system;
  if (caches && ir.cache) lastMessageCachePoint(body.messages as ConverseMessage[], ir.cache);
  const tools = toolConfig(ir, { caches });
  if (tools) body.toolConfig = tools;
  // Claude on Bedrock takes Anthropic's own `thinking` here; other models have no such field.
  if (ir.thinking && /anthropic|claude/i.test(model)) {
    body.additionalModelRequestFields = { thinking: bedrockThinking(ir.thinking) };
  }
  const inference = inferenceConfig(ir, model);
  if (inference) body.inferenceConfig = inference;
  const output = outputConfig(ir.responseFormat);
  if (output) body.outputConfig = output;
  return body;
}

/**
 * Structured output as Converse's `outputConfig.textFormat`, whose schema is
 * JSON text rather than an object. Models that do not support it answer 400,
 * which the caller sees as is.
 */
function outputConfig(format: IrResponseFormat | undefined): Record<string, unknown> | undefined {
  if (format?.type !== "json_schema") return undefined;
  const jsonSchema: Record<string, unknown> = {
    name: format.name,
    schema: JSON.stringify(format.schema),
  };
  if (format.description !== undefined) jsonSchema.description = format.description;
  return { textFormat: { type: "json_schema", structure: { jsonSchema } } };
}

/**
 * Models that take `cachePoint` blocks (Claude and Nova); any other would refuse the request, so
 * its cache marks are left out (docs/observability.md "Where the cache is carried").
 */
function cachesPrompts(model: string): boolean {
  return /anthropic|claude|nova/i.test(model);
}

/** Converse's cache breakpoint, the block that follows what may be cached. */
function cachePoint(mark: IrCacheMark): Block {
  return { cachePoint: mark.ttl ? { type: "default", ttl: mark.ttl } : { type: "default" } };
}

function systemBlocks(ir: IrRequest, opts: { caches: boolean }): Block[] {
  if (opts.caches && ir.systemBlocks?.length) {
    return ir.systemBlocks.flatMap((b) => [
      ...(b.text === "" ? [] : [{ text: b.text }]),
      ...(b.cache ? [cachePoint(b.cache)] : []),
    ]);
  }
  return ir.system === undefined || ir.system === "" ? [] : [{ text: ir.system }];
}

/** A request-wide mark (Anthropic's top-level `cache_control`) caches up to the last turn. */
function lastMessageCachePoint(messages: ConverseMessage[], mark: IrCacheMark): void {
  const last = messages.at(-1);
  if (last && !last.content.at(-1)?.cachePoint) last.content.push(cachePoint(mark));
}

function bedrockThinking(thinking: IrThinking): Record<string, unknown> {
  return thinking.type === "enabled"
    ? { type: "enabled", budget_tokens: thinking.budgetTokens }
    : { type: thinking.type };
}

function converseMessages(
  messages: ConversationTurn[],
  opts: { caches: boolean },
): ConverseMessage[] {
  const out: ConverseMessage[] = [];
  for (const m of messages) {
    const content = m.content.flatMap((part) => {
      const blocks = converseBlock(part);
      return opts.caches && part.cache && blocks.length
        ? [...blocks, cachePoint(part.cache)]
        : blocks;
    });
    const last = out.at(-1);
    // Converse rejects two turns of one role in a row, which other formats allow: join them.
    if (last?.role === m.role) appendAll(last.content, content);
    else out.push({ role: m.role, content });
  }
  return out;
}

function converseBlock(part: IrPart): Block[] {
  switch (part.type) {
    case "text":
      // Converse rejects blank text blocks; an empty string says nothing anyway.
      return part.text === "" ? [] : [{ text: part.text }];
    case "refusal":
      return [{ text: part.text }];
    case "image": {
      // unsupportedFor has refused the other image types.
      const format = imageFormats[part.mediaType.toLowerCase()] ?? "png";
      return [{ image: { format, source: { bytes: part.data } } }];
    }
    case "image_url":
      return []; // refused by unsupportedFor
    case "reasoning":
      return [{
        reasoningContent: {
          reasoningText: part.signature === undefined
            ? { text: part.text }
            : { text: part.text, signature: part.signature },
        },
      }];
    case "tool_call":
      return [{
        toolUse: {
          toolUseId: part.id,
          name: part.name,
          input: toolArguments(part, `arguments of tool call ${echoed(part.id)}`),
        },
      }];
    case "tool_result":
      return [{ toolResult: toolResult(part) }];
  }
}

function toolResult(part: Extract<IrPart, { type: "tool_result" }>): Block {
  const result: Block = { toolUseId: part.toolCallId, content: [{ text: part.content }] };
  // `status` is only accepted by some models, so it is sent only when it carries news.
  if (part.isError) result.status = "error";
  return result;
}

const imageFormats: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/jpg": "jpeg",
  "image/gif": "gif",
  "image/webp": "webp",
};

function toolConfig(ir: IrRequest, opts: { caches: boolean }): Record<string, unknown> | undefined {
  if (!ir.tools?.length) {
    if (ir.toolChoice === "required" || typeof ir.toolChoice === "object") {
      throw clientError("'tool_choice' asks for a tool call but no tools are defined", {
        param: "tool_choice",
      });
    }
    return undefined;
  }
  const config: Record<string, unknown> = {
    tools: ir.tools.flatMap((t) => [
      {
        toolSpec: {
          name: t.name,
          ...(t.description ? { description: t.description } : {}),
          inputSchema: { json: t.parameters },
        },
      },
      ...(opts.caches && t.cache ? [cachePoint(t.cache)] : []),
    ]),
  };
  const choice = toolChoice(ir.toolChoice);
  if (choice) config.toolChoice = choice;
  return config;
}

function toolChoice(choice: IrToolChoice | undefined): Record<string, unknown> | undefined {
  if (choice === undefined) return undefined;
  if (choice === "auto") return { auto: {} };
  if (choice === "required") return { any: {} };
  if (choice === "none") return undefined; // with tools, refused by unsupportedFor
  return { tool: { name: choice.name } };
}

/**
 * Claude models refuse temperature and top_p together, on Bedrock as on
 * Anthropic's API: for them temperature is kept, as in the Anthropic builder.
 */
function inferenceConfig(ir: IrRequest, model: string): Record<string, unknown> | undefined {
  const config: Record<string, unknown> = {};
  if (ir.maxTokens !== undefined) config.maxTokens = ir.maxTokens;
  if (ir.temperature !== undefined) config.temperature = ir.temperature;
  const oneOfTwo = /anthropic|claude/i.test(model) && ir.temperature !== undefined;
  if (ir.topP !== undefined && !oneOfTwo) config.topP = ir.topP;
  if (ir.stop?.length) config.stopSequences = ir.stop;
  return Object.keys(config).length ? config : undefined;
}
