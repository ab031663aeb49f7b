import { clientError } from "../gateway_error.ts";
import type { IrMessage, IrPart, IrRequest, IrToolChoice } from "../ir.ts";
import { argumentsObject } from "../request_fields.ts";

type Block = Record<string, unknown>;

interface ConverseMessage {
  role: "user" | "assistant";
  content: Block[];
}

/** `{base}/model/{modelId}/converse[-stream]`; ids such as `...-v1:0` or ARNs are one path segment. */
export function converseUrl(base: string, opts: { model: string; stream: boolean }): string {
  const action = opts.stream ? "converse-stream" : "converse";
  return `${base.replace(/\/+$/, "")}/model/${encodeURIComponent(opts.model)}/${action}`;
}

/** Writes the gateway's request as a Converse / ConverseStream body (the model goes in the URL). */
export function converseRequestBody(ir: IrRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { messages: converseMessages(ir.messages) };
  if (ir.system !== undefined && ir.system !== "") body.system = [{ text: ir.system }];
  const tools = toolConfig(ir);
  if (tools) body.toolConfig = tools;
  const inference = inferenceConfig(ir);
  if (inference) body.inferenceConfig = inference;
  return body;
}

function converseMessages(messages: IrMessage[]): ConverseMessage[] {
  const out: ConverseMessage[] = [];
  for (const m of messages) {
    const content = m.content.flatMap(converseBlock);
    const last = out.at(-1);
    // Converse rejects two turns of one role in a row, which other formats allow: join them.
    if (last?.role === m.role) last.content.push(...content);
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
    case "image":
      return [{ image: { format: imageFormat(part.mediaType), source: { bytes: part.data } } }];
    case "image_url":
      throw clientError(
        "a Bedrock upstream takes images only inline (base64 data), not by URL",
        { code: "gw.client.unsupported" },
      );
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
          input: argumentsObject(part.arguments, `arguments of tool call ${part.id}`),
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

function imageFormat(mediaType: string): string {
  const format = imageFormats[mediaType.toLowerCase()];
  if (format) return format;
  throw clientError(
    `image type '${mediaType}' cannot be sent to a Bedrock upstream (png, jpeg, gif or webp)`,
    { code: "gw.client.unsupported" },
  );
}

function toolConfig(ir: IrRequest): Record<string, unknown> | undefined {
  if (!ir.tools?.length) {
    if (ir.toolChoice === "required" || typeof ir.toolChoice === "object") {
      throw clientError("'tool_choice' asks for a tool call but no tools are defined", {
        param: "tool_choice",
      });
    }
    return undefined;
  }
  const config: Record<string, unknown> = {
    tools: ir.tools.map((t) => ({
      toolSpec: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        inputSchema: { json: t.parameters },
      },
    })),
  };
  const choice = toolChoice(ir.toolChoice);
  if (choice) config.toolChoice = choice;
  return config;
}

function toolChoice(choice: IrToolChoice | undefined): Record<string, unknown> | undefined {
  if (choice === undefined) return undefined;
  if (choice === "auto") return { auto: {} };
  if (choice === "required") return { any: {} };
  if (choice === "none") {
    // Converse has no "none"; sending the tools without it would let the model call one.
    throw clientError(
      "tool_choice 'none' cannot be expressed on a Bedrock upstream; leave out the tools instead",
      { param: "tool_choice", code: "gw.client.unsupported" },
    );
  }
  return { tool: { name: choice.name } };
}

function inferenceConfig(ir: IrRequest): Record<string, unknown> | undefined {
  const config: Record<string, unknown> = {};
  if (ir.maxTokens !== undefined) config.maxTokens = ir.maxTokens;
  if (ir.temperature !== undefined) config.temperature = ir.temperature;
  if (ir.topP !== undefined) config.topP = ir.topP;
  if (ir.stop?.length) config.stopSequences = ir.stop;
  return Object.keys(config).length ? config : undefined;
}
