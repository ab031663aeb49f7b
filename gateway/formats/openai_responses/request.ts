import { boundedModel } from "../bounded_names.ts";
import { supportsBuiltin } from "../builtin_tools.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { appendAll } from "../../runtime/append_all.ts";
import type {
  IrMessage,
  IrNativeFeature,
  IrPart,
  IrRequest,
  IrResponseFormat,
  IrToolChoice,
} from "../ir.ts";
import { jsonSchemaFormat, parallelToolCalls } from "../openai_chat/request.ts";
import {
  imageFromUrl,
  optionalBoolean,
  optionalNumber,
  optionalString,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { systemText } from "../system_turns.ts";
import {
  loadedToolsText,
  readResponsesTools,
  reshapedCall,
  type ToolsInto,
} from "./client_tools.ts";
import { responsesContinuations } from "./continuations.ts";

/**
 * Where parsed input lands: system text, turns, tools (declared in `tools`
 * and in input items), and what only a Responses upstream can take.
 */
interface Into extends ToolsInto {
  system: string[];
  out: IrMessage[];
  native: IrNativeFeature[];
}

function unsupported(message: string, param: string) {
  return clientError(message, { param, code: "gw.client.unsupported" });
}

/**
 * Reads a Responses API body into the gateway's request.
 *
 * Hints that only tune the answer (`reasoning`, `text.verbosity`,
 * `truncation`, `service_tier`, `store`, `metadata`, `include`) are carried
 * by same-format pass-through and left out of translations. Namespaced,
 * free-form and tool-search tools are flattened into functions
 * (./client_tools.ts); web search is a built-in other kinds may map. What the
 * IR cannot carry (other built-in tools, files, audio, stored state such as
 * `previous_response_id`, log probabilities) is recorded in `nativeOnly`, so
 * only a Responses upstream is tried.
 */
export function parseResponsesRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  const model = boundedModel(requireString(b.model, "model"));
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const into: Into = { system: [], out: [], native: [], tools: [], clientTools: {}, builtins: [] };
  readStateful(b, into);
  const instructions = optionalString(b.instructions, "instructions");
  if (instructions) into.system.push(instructions);
  if (b.tools !== undefined && b.tools !== null) {
    readResponsesTools(b.tools, { param: "tools", into });
  }
  readInput(b.input, into);
  const continuations = responsesContinuations(b);
  const topLogprobs = optionalNumber(b.top_logprobs, "top_logprobs");
  if (topLogprobs !== undefined && topLogprobs > 0) {
    into.native.push({ param: "top_logprobs", what: "log probabilities ('top_logprobs')" });
  }
  return {
    model,
    system: into.system.length ? into.system.join("\n\n") : undefined,
    messages: into.out,
    ...(into.tools.length ? { tools: into.tools } : {}),
    ...(Object.keys(into.clientTools).length ? { clientTools: into.clientTools } : {}),
    ...(into.builtins.length ? { builtinTools: into.builtins } : {}),
    toolChoice: readToolChoice(b.tool_choice, into),
    ...parallelToolCalls(b.parallel_tool_calls),
    maxTokens: optionalNumber(b.max_output_tokens, "max_output_tokens"),
    temperature: optionalNumber(b.temperature, "temperature"),
    topP: optionalNumber(b.top_p, "top_p"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    responseFormat: readTextFormat(b.text, into),
    sessionHint: optionalString(b.prompt_cache_key, "prompt_cache_key") ??
      optionalString(b.user, "user"),
    ...(into.native.length ? { nativeOnly: into.native } : {}),
    ...(continuations.length ? { continuations } : {}),
    // OpenAI keeps an answer, and so its ids, unless told not to (`store`, on by default).
    answerContinues: optionalBoolean(b.store, "store") !== false,
  };
}

/**
 * A stored response, conversation or prompt lives at OpenAI: a Responses
 * upstream given the body as is can read it, a translation cannot.
 * `background` is refused outright: its answer is fetched later by id, from
 * an endpoint the gateway does not serve.
 */
function readStateful(b: Record<string, unknown>, into: Into): void {
  const stateful: [string, string][] = [
    ["previous_response_id", "a stored previous response ('previous_response_id')"],
    ["conversation", "a stored conversation ('conversation')"],
    ["prompt", "a stored prompt ('prompt')"],
  ];
  for (const [field, what] of stateful) {
    if (b[field] !== undefined && b[field] !== null) into.native.push({ param: field, what });
  }
  if (optionalBoolean(b.background, "background")) {
    throw unsupported(
      "'background' is not supported: its answer is fetched later by id, which the gateway does not serve",
      "background",
    );
  }
}

/** `text.format`: text (the default), `json_object`, or `json_schema` with its schema inline. */
function readTextFormat(value: unknown, into: Into): IrResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  const text = requireRecord(value, "text");
  if (text.format === undefined || text.format === null) return undefined;
  const format = requireRecord(text.format, "text.format");
  const type = requireString(format.type, "text.format.type");
  if (type === "text") return undefined;
  if (type === "json_object") return { type: "json_object" };
  if (type === "json_schema") return jsonSchemaFormat(format, "text.format");
  into.native.push({ param: "text.format.type", what: `text format '${type}'` });
  return undefined;
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
  const type = optionalString(item.type, `${param}.type`) ?? "message";
  if (type === "message") return readMessage(item, param, into);
  const call = reshapedCall(item, param);
  if (call) return pushAssistant(into, [call]);
  if (type === "function_call_output" || type === "custom_tool_call_output") {
    return pushToolResult(into, {
      type: "tool_result",
      toolCallId: requireString(item.call_id, `${param}.call_id`),
      content: toolOutputText(item.output, { param: `${param}.output`, into }),
    });
  }
  if (type === "additional_tools") {
    // Tools made available from here on: every other format declares tools once, up front.
    readResponsesTools(item.tools, { param: `${param}.tools`, into });
    return;
  }
  if (type === "tool_search_output" && item.execution === "client") {
    const names = readResponsesTools(item.tools, { param: `${param}.tools`, into });
    return pushToolResult(into, {
      type: "tool_result",
      toolCallId: requireString(item.call_id, `${param}.call_id`),
      content: loadedToolsText(names),
    });
  }
  if (type === "reasoning") return pushAssistant(into, reasoningParts(item, param));
  // item_reference, built-in tool calls and their outputs: OpenAI's own items.
  into.native.push({ param: `${param}.type`, what: `a '${type}' input item` });
}

function readMessage(item: Record<string, unknown>, param: string, into: Into): void {
  const role = requireString(item.role, `${param}.role`);
  const at = { param: `${param}.content`, into };
  if (role === "system" || role === "developer") {
    // Leading instructions are the system prompt; later ones keep their place.
    const text = textOf(readParts(item.content, { ...at, images: false }));
    if (!into.out.length) into.system.push(text);
    else into.out.push({ role: "system", content: [{ type: "text", text }] });
  } else if (role === "user") {
    into.out.push({ role: "user", content: readParts(item.content, { ...at, images: true }) });
  } else if (role === "assistant") {
    pushAssistant(into, readParts(item.content, { ...at, images: false }));
  } else {
    throw clientError(`'${param}.role' must be system, developer, user or assistant`, {
      param: `${param}.role`,
    });
  }
}

/** Consecutive assistant items (reasoning, text, calls) are one turn to every other format. */
function pushAssistant(into: Into, parts: IrPart[]): void {
  const last = into.out.at(-1);
  if (last?.role === "assistant") appendAll(last.content, parts);
  else into.out.push({ role: "assistant", content: parts });
}

function pushToolResult(into: Into, part: Extract<IrPart, { type: "tool_result" }>): void {
  const last = into.out.at(-1);
  // Consecutive results answer one assistant turn: keep them in one user turn.
  if (last?.role === "user" && last.content.every((p) => p.type === "tool_result")) {
    last.content.push(part);
  } else into.out.push({ role: "user", content: [part] });
}

interface PartOpts {
  param: string;
  into: Into;
  /** Whether an image is an IR part here (a user turn) or OpenAI's alone (elsewhere). */
  images: boolean;
}

function readParts(content: unknown, opts: PartOpts): IrPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return requireArray(content, opts.param).flatMap((p, i): IrPart[] => {
    const at = `${opts.param}[${i}]`;
    const part = requireRecord(p, at);
    const type = requireString(part.type, `${at}.type`);
    if (type === "input_text" || type === "output_text") {
      return [{ type: "text", text: requireString(part.text, `${at}.text`) }];
    }
    if (type === "refusal") {
      return [{ type: "refusal", text: requireString(part.refusal, `${at}.refusal`) }];
    }
    if (type === "input_image" && opts.images && typeof part.image_url === "string") {
      return [imageFromUrl(part.image_url)];
    }
    // A `file_id` names an upload in OpenAI's Files API, which no other provider can read.
    const what = type === "input_image" && part.file_id !== undefined
      ? "an image by 'file_id'"
      : `a '${type}' content part here`;
    const param = type === "input_image" ? `${at}.image_url` : `${at}.type`;
    opts.into.native.push({ param, what });
    return [];
  });
}

function textOf(parts: IrPart[]): string {
  return parts.map((p) => (p.type === "text" ? p.text : "")).join("");
}

function toolOutputText(output: unknown, opts: { param: string; into: Into }): string {
  if (typeof output === "string") return output;
  return textOf(readParts(output, { ...opts, images: false }));
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

function readToolChoice(value: unknown, into: Into): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === "auto" || value === "none" || value === "required") return value;
  const choice = requireRecord(value, "tool_choice");
  const type = requireString(choice.type, "tool_choice.type");
  if (type !== "function") {
    into.native.push({ param: "tool_choice.type", what: `tool_choice '${type}'` });
    return undefined;
  }
  return { name: requireString(choice.name, "tool_choice.name") };
}

/**
 * What of a translated request a Responses body cannot say: it has no stop
 * sequences, a user turn holds no refusals or calls and an assistant turn no
 * images or tool results.
 */
export function unsupportedFor(ir: IrRequest): string[] {
  const out = new Set<string>();
  if (ir.stop?.length) out.add("stop sequences");
  for (const m of ir.messages) {
    for (const p of m.content) {
      if (p.type !== "reasoning" && !standaloneItem(p, m.role) && !contentPart(p, m.role)) {
        out.add(`part '${p.type}' in ${m.role === "user" ? "a user" : "an assistant"} turn`);
      }
    }
  }
  return [...out];
}

/** Writes the gateway's request as a Responses API body for `model`. */
export function responsesRequestBody(ir: IrRequest, model: string): Record<string, unknown> {
  const refused = unsupportedFor(ir);
  if (refused.length) {
    throw unsupported(
      `an OpenAI Responses upstream cannot take ${refused.join("; ")}`,
      ir.stop?.length ? "stop" : "input",
    );
  }
  // Nothing is ever read back by id, so nothing is left stored at OpenAI.
  const body: Record<string, unknown> = {
    model,
    input: ir.messages.flatMap(inputItems),
    store: false,
  };
  if (ir.system !== undefined) body.instructions = ir.system;
  const tools: Record<string, unknown>[] = (ir.tools ?? []).map((t) => ({
    type: "function",
    name: t.name,
    description: t.description,
    parameters: t.parameters,
  }));
  // Built-ins Responses lacks were dropped by the route's choice (the engine skips the candidate otherwise).
  if (ir.builtinTools?.some((t) => supportsBuiltin("openai-responses", t))) {
    tools.push({ type: "web_search" });
  }
  if (tools.length) body.tools = tools;
  if (tools.length && ir.parallelToolCalls !== undefined) {
    body.parallel_tool_calls = ir.parallelToolCalls;
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
  // The IR's response format is Responses' own `text.format` shape, field for field.
  if (ir.responseFormat) body.text = { format: { ...ir.responseFormat } };
  return body;
}

/**
 * One turn as Responses input items. Runs of text/images become one message
 * item; calls and results are items of their own, in the order they came.
 * Earlier reasoning is left out: the API takes back only reasoning items it
 * issued itself (by id), and the model does not need it to continue.
 */
function inputItems(m: IrMessage): Record<string, unknown>[] {
  if (m.role === "system") {
    return [{
      type: "message",
      role: "system",
      content: [{ type: "input_text", text: systemText(m) }],
    }];
  }
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
    } else {
      // unsupportedFor has refused the parts with no place here; reasoning is left out.
      const piece = contentPart(part, m.role);
      if (piece) content.push(piece);
    }
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

/** A part as message content, or null where a message of this role has no place for it. */
function contentPart(part: IrPart, role: IrMessage["role"]): Record<string, unknown> | null {
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
  return null;
}
