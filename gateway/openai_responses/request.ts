import { clientError } from "../gateway_error.ts";
import type { IrMessage, IrPart, IrRequest, IrTool, IrToolChoice } from "../ir.ts";
import {
  imageFromUrl,
  optionalBoolean,
  optionalNumber,
  optionalString,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { isRecord } from "../sse_frames.ts";

/** Where parsed input lands: system text and the alternating turns. */
interface Into {
  system: string[];
  out: IrMessage[];
}

function unsupported(message: string, param: string) {
  return clientError(message, { param, code: "gw.client.unsupported" });
}

/** Reads a Responses API body into the gateway's request. */
export function parseResponsesRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  refuseStateful(b);
  const model = requireString(b.model, "model");
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const into: Into = { system: [], out: [] };
  const instructions = optionalString(b.instructions, "instructions");
  if (instructions) into.system.push(instructions);
  readInput(b.input, into);
  return {
    model,
    system: into.system.length ? into.system.join("\n\n") : undefined,
    messages: into.out,
    tools: readTools(b.tools),
    toolChoice: readToolChoice(b.tool_choice),
    maxTokens: optionalNumber(b.max_output_tokens, "max_output_tokens"),
    temperature: optionalNumber(b.temperature, "temperature"),
    topP: optionalNumber(b.top_p, "top_p"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    sessionHint: optionalString(b.prompt_cache_key, "prompt_cache_key") ??
      optionalString(b.user, "user"),
  };
}

/**
 * The gateway keeps no state between requests and may answer from a
 * different provider each time, so anything that points at a stored
 * response, conversation or prompt on OpenAI's side cannot be honoured.
 */
function refuseStateful(b: Record<string, unknown>): void {
  const stateful: [string, string][] = [
    ["previous_response_id", "send the whole conversation in 'input' instead"],
    ["conversation", "send the whole conversation in 'input' instead"],
    ["prompt", "send the prompt text in 'instructions' and 'input' instead"],
  ];
  for (const [field, hint] of stateful) {
    if (b[field] !== undefined && b[field] !== null) {
      throw unsupported(`'${field}' is not supported: the gateway is stateless; ${hint}`, field);
    }
  }
  if (b.background === true) {
    throw unsupported("'background' is not supported: the gateway is stateless", "background");
  }
  const text = isRecord(b.text) ? b.text : {};
  const format = isRecord(text.format) ? text.format : undefined;
  if (format && format.type !== "text") {
    throw unsupported(
      `'text.format' of type '${String(format.type)}' is not supported by the gateway`,
      "text.format",
    );
  }
}

function readInput(input: unknown, into: Into): void {
  if (typeof input === "string") {
    into.out.push({ role: "user", content: [{ type: "text", text: input }] });
    return;
  }
  requireArray(input, "input").forEach((item, i) => readItem(item, `input[${i}]`, into));
}

function readItem(value: unknown, param: string, into: Into): void {
  const item = requireRecord(value, param);
  // Short-hand messages ({role, content}) may leave the type out.
  const type = item.type ?? "message";
  if (type === "message") return readMessage(item, param, into);
  if (type === "function_call") {
    return pushAssistant(into, [{
      type: "tool_call",
      id: requireString(item.call_id, `${param}.call_id`),
      name: requireString(item.name, `${param}.name`),
      arguments: optionalString(item.arguments, `${param}.arguments`) ?? "{}",
    }]);
  }
  if (type === "function_call_output") {
    return pushToolResult(into, {
      type: "tool_result",
      toolCallId: requireString(item.call_id, `${param}.call_id`),
      content: toolOutputText(item.output, `${param}.output`),
    });
  }
  if (type === "reasoning") return pushAssistant(into, reasoningParts(item, param));
  if (type === "item_reference") {
    throw unsupported(
      "'item_reference' input items are not supported: the gateway is stateless",
      `${param}.type`,
    );
  }
  throw unsupported(`input item type '${String(type)}' is not supported`, `${param}.type`);
}

function readMessage(item: Record<string, unknown>, param: string, into: Into): void {
  const role = requireString(item.role, `${param}.role`);
  const at = `${param}.content`;
  if (role === "system" || role === "developer") {
    into.system.push(textOf(readParts(item.content, { param: at, images: false })));
  } else if (role === "user") {
    into.out.push({ role: "user", content: readParts(item.content, { param: at, images: true }) });
  } else if (role === "assistant") {
    pushAssistant(into, readParts(item.content, { param: at, images: false }));
  } else {
    throw clientError(`'${param}.role' must be system, developer, user or assistant`, {
      param: `${param}.role`,
    });
  }
}

/** Consecutive assistant items (reasoning, text, calls) are one turn to every other format. */
function pushAssistant(into: Into, parts: IrPart[]): void {
  const last = into.out.at(-1);
  if (last?.role === "assistant") last.content.push(...parts);
  else into.out.push({ role: "assistant", content: parts });
}

function pushToolResult(into: Into, part: Extract<IrPart, { type: "tool_result" }>): void {
  const last = into.out.at(-1);
  // Consecutive results answer one assistant turn: keep them in one user turn.
  if (last?.role === "user" && last.content.every((p) => p.type === "tool_result")) {
    last.content.push(part);
  } else into.out.push({ role: "user", content: [part] });
}

function readParts(content: unknown, opts: { param: string; images: boolean }): IrPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return requireArray(content, opts.param).map((p, i) => {
    const at = `${opts.param}[${i}]`;
    const part = requireRecord(p, at);
    if (part.type === "input_text" || part.type === "output_text") {
      return { type: "text", text: requireString(part.text, `${at}.text`) };
    }
    if (part.type === "refusal") {
      return { type: "refusal", text: requireString(part.refusal, `${at}.refusal`) };
    }
    if (part.type === "input_image" && opts.images) return readImage(part, at);
    throw unsupported(
      `content part type '${String(part.type)}' is not supported here`,
      `${at}.type`,
    );
  });
}

function readImage(part: Record<string, unknown>, param: string): IrPart {
  if (typeof part.image_url === "string") return imageFromUrl(part.image_url);
  throw unsupported(
    "images by 'file_id' are not supported: the gateway cannot read OpenAI files; send 'image_url'",
    `${param}.image_url`,
  );
}

function textOf(parts: IrPart[]): string {
  return parts.map((p) => (p.type === "text" ? p.text : "")).join("");
}

function toolOutputText(output: unknown, param: string): string {
  if (typeof output === "string") return output;
  return textOf(readParts(output, { param, images: false }));
}

function reasoningParts(item: Record<string, unknown>, param: string): IrPart[] {
  const pieces = [
    ...(Array.isArray(item.summary) ? item.summary : []),
    ...(Array.isArray(item.content) ? item.content : []),
  ];
  const text = pieces.map((p, i) => {
    const piece = requireRecord(p, `${param}.summary[${i}]`);
    return typeof piece.text === "string" ? piece.text : "";
  }).join("\n\n");
  return text ? [{ type: "reasoning", text }] : [];
}

function readTools(value: unknown): IrTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").map((t, i) => {
    const at = `tools[${i}]`;
    const tool = requireRecord(t, at);
    if (tool.type !== "function") {
      throw unsupported(
        `built-in tool '${String(tool.type)}' is not supported: the gateway forwards only ` +
          "function tools, which any upstream can run",
        `${at}.type`,
      );
    }
    return {
      name: requireString(tool.name, `${at}.name`),
      description: optionalString(tool.description, `${at}.description`),
      parameters: isRecord(tool.parameters) ? tool.parameters : { type: "object", properties: {} },
    };
  });
}

function readToolChoice(value: unknown): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === "auto" || value === "none" || value === "required") return value;
  const choice = requireRecord(value, "tool_choice");
  if (choice.type !== "function") {
    throw unsupported(
      `tool_choice type '${String(choice.type)}' is not supported`,
      "tool_choice.type",
    );
  }
  return { name: requireString(choice.name, "tool_choice.name") };
}

/** Writes the gateway's request as a Responses API body for `model`. */
export function responsesRequestBody(ir: IrRequest, model: string): Record<string, unknown> {
  if (ir.stop?.length) {
    throw unsupported("stop sequences cannot be sent to an OpenAI Responses upstream", "stop");
  }
  // Nothing is ever read back by id, so nothing is left stored at OpenAI.
  const body: Record<string, unknown> = {
    model,
    input: ir.messages.flatMap(inputItems),
    store: false,
  };
  if (ir.system !== undefined) body.instructions = ir.system;
  if (ir.tools?.length) {
    body.tools = ir.tools.map((t) => ({
      type: "function",
      name: t.name,
      description: t.description,
      parameters: t.parameters,
    }));
  }
  if (ir.toolChoice !== undefined) {
    body.tool_choice = typeof ir.toolChoice === "string"
      ? ir.toolChoice
      : { type: "function", name: ir.toolChoice.name };
  }
  if (ir.maxTokens !== undefined) body.max_output_tokens = ir.maxTokens;
  if (ir.temperature !== undefined) body.temperature = ir.temperature;
  if (ir.topP !== undefined) body.top_p = ir.topP;
  if (ir.stream) body.stream = true;
  return body;
}

/**
 * One turn as Responses input items. Runs of text/images become one message
 * item; calls and results are items of their own, in the order they came.
 * Earlier reasoning is left out: the API takes back only reasoning items it
 * issued itself (by id), and the model does not need it to continue.
 */
function inputItems(m: IrMessage): Record<string, unknown>[] {
  const items: Record<string, unknown>[] = [];
  let content: Record<string, unknown>[] = [];
  const flush = () => {
    if (content.length) items.push({ type: "message", role: m.role, content });
    content = [];
  };
  for (const part of m.content) {
    const item = standaloneItem(part, m.role);
    if (item) {
      flush();
      items.push(item);
    } else if (part.type !== "reasoning") content.push(contentPart(part, m.role));
  }
  flush();
  return items;
}

function standaloneItem(part: IrPart, role: IrMessage["role"]): Record<string, unknown> | null {
  if (part.type === "tool_call" && role === "assistant") {
    return { type: "function_call", call_id: part.id, name: part.name, arguments: part.arguments };
  }
  if (part.type === "tool_result" && role === "user") {
    return { type: "function_call_output", call_id: part.toolCallId, output: part.content };
  }
  return null;
}

function contentPart(part: IrPart, role: IrMessage["role"]): Record<string, unknown> {
  if (part.type === "text") {
    return { type: role === "assistant" ? "output_text" : "input_text", text: part.text };
  }
  if (part.type === "refusal" && role === "assistant") {
    return { type: "refusal", refusal: part.text };
  }
  if (part.type === "image" && role === "user") {
    return {
      type: "input_image",
      image_url: `data:${part.mediaType};base64,${part.data}`,
      detail: "auto",
    };
  }
  if (part.type === "image_url" && role === "user") {
    return { type: "input_image", image_url: part.url, detail: "auto" };
  }
  throw clientError(`a ${role} ${part.type} part cannot be sent to an OpenAI Responses upstream`, {
    code: "gw.client.unsupported",
  });
}
