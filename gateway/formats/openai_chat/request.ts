import { boundedModel } from "../bounded_names.ts";
import { type Upstream, upstreamBaseUrl } from "../../config/schema.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { appendAll } from "../../runtime/append_all.ts";
import type {
  IrMessage,
  IrNativeFeature,
  IrPart,
  IrRequest,
  IrResponseFormat,
  IrTool,
  IrToolChoice,
} from "../ir.ts";
import {
  imageFromUrl,
  optionalBoolean,
  optionalNumber,
  optionalString,
  optionalStringList,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { isRecord } from "../../runtime/json.ts";
import { systemText } from "../system_turns.ts";
import { boundedMemo } from "../../runtime/memo.ts";
import { azureOf } from "../cloud/azure.ts";

/** Where parsed input lands: system text, turns, and what only a Chat upstream can take. */
interface Into {
  system: string[];
  out: IrMessage[];
  native: IrNativeFeature[];
}

/**
 * Reads a Chat Completions body into the gateway's request.
 *
 * Hints that only tune the answer (`seed`, `frequency_penalty`,
 * `presence_penalty`, `logit_bias`, `reasoning_effort`, `verbosity`,
 * `service_tier`, `store`, `metadata`, `prediction`)
 * are carried by same-format pass-through and left out of translations.
 * What changes the answer itself and has no IR slot (audio or file parts,
 * non-function tools, several choices, audio output, log probabilities,
 * web search) is recorded in `nativeOnly`, so only a Chat upstream is tried.
 */
export function parseChatRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  const model = boundedModel(requireString(b.model, "model"));
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const messages = requireArray(b.messages, "messages");
  const into: Into = { system: [], out: [], native: [] };
  messages.forEach((m, i) => readMessage(m, `messages[${i}]`, into));
  readAnswerShape(b, into);
  return {
    model,
    system: into.system.length ? into.system.join("\n\n") : undefined,
    messages: into.out,
    tools: readTools(b.tools, into),
    toolChoice: readToolChoice(b.tool_choice, into),
    ...parallelToolCalls(b.parallel_tool_calls),
    maxTokens: optionalNumber(b.max_completion_tokens, "max_completion_tokens") ??
      optionalNumber(b.max_tokens, "max_tokens"),
    temperature: optionalNumber(b.temperature, "temperature"),
    topP: optionalNumber(b.top_p, "top_p"),
    stop: optionalStringList(b.stop, "stop"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    responseFormat: readResponseFormat(b.response_format),
    sessionHint: optionalString(b.prompt_cache_key, "prompt_cache_key") ??
      optionalString(b.user, "user"),
    ...(into.native.length ? { nativeOnly: into.native } : {}),
  };
}

/** Fields that ask for a different answer than one text/tool message: the IR has none of them. */
function readAnswerShape(b: Record<string, unknown>, into: Into): void {
  const n = optionalNumber(b.n, "n");
  if (n !== undefined && n > 1) into.native.push({ param: "n", what: "several choices ('n')" });
  const modalities = optionalStringList(b.modalities, "modalities");
  if (modalities?.some((m) => m !== "text") || hasValue(b.audio)) {
    into.native.push({ param: "modalities", what: "audio output ('modalities', 'audio')" });
  }
  if (optionalBoolean(b.logprobs, "logprobs")) {
    into.native.push({ param: "logprobs", what: "log probabilities ('logprobs')" });
  }
  if (hasValue(b.web_search_options)) {
    into.native.push({ param: "web_search_options", what: "web search ('web_search_options')" });
  }
}

/** `parallel_tool_calls`, as Chat and Responses spell it. */
export function parallelToolCalls(value: unknown): { parallelToolCalls?: boolean } {
  const parallel = optionalBoolean(value, "parallel_tool_calls");
  return parallel === undefined ? {} : { parallelToolCalls: parallel };
}

function hasValue(value: unknown): boolean {
  return value !== undefined && value !== null;
}

/** `response_format`: text (the default), `json_object`, or `json_schema` with its schema. */
function readResponseFormat(value: unknown): IrResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  const format = requireRecord(value, "response_format");
  const type = requireString(format.type, "response_format.type");
  if (type === "text") return undefined;
  if (type === "json_object") return { type: "json_object" };
  if (type !== "json_schema") {
    throw clientError("'response_format.type' must be text, json_object or json_schema", {
      param: "response_format.type",
    });
  }
  const spec = requireRecord(format.json_schema, "response_format.json_schema");
  return jsonSchemaFormat(spec, "response_format.json_schema");
}

/** The `{name, description, schema, strict}` both OpenAI formats use for a JSON schema. */
export function jsonSchemaFormat(spec: Record<string, unknown>, param: string): IrResponseFormat {
  const description = optionalString(spec.description, `${param}.description`);
  const strict = optionalBoolean(spec.strict, `${param}.strict`);
  return {
    type: "json_schema",
    name: requireString(spec.name, `${param}.name`),
    ...(description === undefined ? {} : { description }),
    schema: spec.schema === undefined || spec.schema === null
      ? {}
      : requireRecord(spec.schema, `${param}.schema`),
    ...(strict === undefined ? {} : { strict }),
  };
}

function readMessage(value: unknown, param: string, into: Into): void {
  const m = requireRecord(value, param);
  const role = requireString(m.role, `${param}.role`);
  if (role === "system" || role === "developer") {
    // Leading instructions are the system prompt; later ones keep their place.
    const text = textOf(m.content, `${param}.content`);
    if (!into.out.length) into.system.push(text);
    else into.out.push({ role: "system", content: [{ type: "text", text }] });
  } else if (role === "user") {
    into.out.push({
      role: "user",
      content: readParts(m.content, { param: `${param}.content`, into }),
    });
  } else if (role === "assistant") {
    into.out.push({ role: "assistant", content: readAssistant(m, { param, into }) });
  } else if (role === "tool") {
    const part: IrPart = {
      type: "tool_result",
      toolCallId: requireString(m.tool_call_id, `${param}.tool_call_id`),
      content: textOf(m.content, `${param}.content`),
    };
    const last = into.out.at(-1);
    // Consecutive tool results answer one assistant turn: keep them in one user turn.
    if (last?.role === "user" && last.content.every((p) => p.type === "tool_result")) {
      last.content.push(part);
    } else into.out.push({ role: "user", content: [part] });
  } else {
    throw clientError(`'${param}.role' must be system, developer, user, assistant or tool`, {
      param: `${param}.role`,
    });
  }
}

function readAssistant(m: Record<string, unknown>, opts: { param: string; into: Into }): IrPart[] {
  const { param } = opts;
  const parts: IrPart[] = m.content === undefined || m.content === null
    ? []
    : readParts(m.content, { param: `${param}.content`, into: opts.into });
  const refusal = optionalString(m.refusal, `${param}.refusal`);
  if (refusal) parts.push({ type: "refusal", text: refusal });
  if (m.tool_calls !== undefined && m.tool_calls !== null) {
    requireArray(m.tool_calls, `${param}.tool_calls`).forEach((c, i) => {
      const at = `${param}.tool_calls[${i}]`;
      const call = requireRecord(c, at);
      const fn = requireRecord(call.function, `${at}.function`);
      parts.push({
        type: "tool_call",
        id: requireString(call.id, `${at}.id`),
        name: requireString(fn.name, `${at}.function.name`),
        arguments: optionalString(fn.arguments, `${at}.function.arguments`) ?? "{}",
      });
    });
  }
  return parts;
}

/**
 * Text, images and refusals become IR parts; any other part (audio, a file)
 * is recorded as native-only, or refused where the IR needs text.
 */
function readParts(content: unknown, opts: { param: string; into?: Into }): IrPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return requireArray(content, opts.param).flatMap((p, i): IrPart[] => {
    const at = `${opts.param}[${i}]`;
    const part = requireRecord(p, at);
    const type = requireString(part.type, `${at}.type`);
    if (type === "text") return [{ type: "text", text: requireString(part.text, `${at}.text`) }];
    if (type === "image_url") {
      const image = requireRecord(part.image_url, `${at}.image_url`);
      return [imageFromUrl(requireString(image.url, `${at}.image_url.url`))];
    }
    if (type === "refusal") {
      return [{ type: "refusal", text: requireString(part.refusal, `${at}.refusal`) }];
    }
    if (!opts.into) {
      throw clientError(`'${opts.param}' must be text`, { param: `${at}.type` });
    }
    opts.into.native.push({ param: `${at}.type`, what: `a '${type}' content part` });
    return [];
  });
}

function textOf(content: unknown, param: string): string {
  return readParts(content, { param }).map((p) => {
    if (p.type !== "text") throw clientError(`'${param}' must be text`, { param });
    return p.text;
  }).join("");
}

function readTools(value: unknown, into: Into): IrTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").flatMap((t, i) => {
    const tool = requireRecord(t, `tools[${i}]`);
    const type = requireString(tool.type, `tools[${i}].type`);
    if (type !== "function") {
      into.native.push({ param: `tools[${i}].type`, what: `a '${type}' tool` });
      return [];
    }
    const fn = requireRecord(tool.function, `tools[${i}].function`);
    return [{
      name: requireString(fn.name, `tools[${i}].function.name`),
      description: optionalString(fn.description, `tools[${i}].function.description`),
      parameters: isRecord(fn.parameters) ? fn.parameters : { type: "object", properties: {} },
    }];
  });
}

function readToolChoice(value: unknown, into: Into): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === "auto" || value === "none" || value === "required") return value;
  const choice = requireRecord(value, "tool_choice");
  const type = optionalString(choice.type, "tool_choice.type") ?? "function";
  if (type !== "function") {
    // `allowed_tools` and custom tools: a restriction only OpenAI knows how to apply.
    into.native.push({ param: "tool_choice.type", what: `tool_choice '${type}'` });
    return undefined;
  }
  const fn = requireRecord(choice.function, "tool_choice.function");
  return { name: requireString(fn.name, "tool_choice.function.name") };
}

/** Parts a Chat user turn can carry besides tool results (which become `tool` messages). */
const userPartTypes = new Set<IrPart["type"]>(["text", "image", "image_url", "tool_result"]);

/**
 * What of a translated request a Chat Completions body cannot say: a user
 * turn holds only text and images (reasoning, refusals and calls are the
 * assistant's).
 */
export function unsupportedFor(ir: IrRequest): string[] {
  const out = new Set<string>();
  for (const m of ir.messages) {
    if (m.role !== "user") continue;
    for (const p of m.content) {
      if (!userPartTypes.has(p.type)) out.add(`part '${p.type}' in a user turn`);
    }
  }
  return [...out];
}

/**
 * OpenAI deprecated `max_tokens` for `max_completion_tokens`, and its
 * reasoning models (o-series, gpt-5 and later) refuse `max_tokens`. Many
 * Chat-compatible servers know only `max_tokens`, some refuse unknown fields.
 * So: `max_completion_tokens` for OpenAI's own API (and Azure OpenAI, by its host
 * or its `azure` options) and for reasoning model names anywhere; `max_tokens`
 * for other servers.
 */
export function maxTokensField(
  upstream: Upstream,
  model: string,
): "max_tokens" | "max_completion_tokens" {
  const openAiOwn = isOpenAiHost(upstreamBaseUrl(upstream)) || azureOf(upstream) !== undefined;
  return openAiOwn || REASONING_MODEL.test(model) ? "max_completion_tokens" : "max_tokens";
}

/** By base URL, parsed once each: every hop to a Chat upstream asks. */
const isOpenAiHost = boundedMemo((baseUrl: string): boolean => {
  const host = URL.parse(baseUrl)?.hostname ?? "";
  return host === "api.openai.com" || host.endsWith(".openai.azure.com");
}, { max: 1024 });

const REASONING_MODEL = /(?:^|\/)(?:o\d+(?:-|$)|gpt-(?:[5-9]|\d\d))/i;

/** Writes the gateway's request as a Chat Completions body for `model`. */
export function chatRequestBody(
  ir: IrRequest,
  model: string,
  opts: { tokenField?: "max_tokens" | "max_completion_tokens" } = {},
): Record<string, unknown> {
  const refused = unsupportedFor(ir);
  if (refused.length) {
    throw clientError(`a Chat Completions upstream cannot take ${refused.join("; ")}`, {
      code: "gw.client.unsupported",
    });
  }
  const messages: Record<string, unknown>[] = [];
  if (ir.system !== undefined) messages.push({ role: "system", content: ir.system });
  for (const m of ir.messages) appendAll(messages, chatMessages(m));
  const body: Record<string, unknown> = { model, messages };
  if (ir.tools?.length) {
    body.tools = ir.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  }
  if (ir.toolChoice !== undefined) {
    body.tool_choice = typeof ir.toolChoice === "string"
      ? ir.toolChoice
      : { type: "function", function: { name: ir.toolChoice.name } };
  }
  if (ir.tools?.length && ir.parallelToolCalls !== undefined) {
    body.parallel_tool_calls = ir.parallelToolCalls;
  }
  if (ir.maxTokens !== undefined) body[opts.tokenField ?? "max_tokens"] = ir.maxTokens;
  if (ir.temperature !== undefined) body.temperature = ir.temperature;
  if (ir.topP !== undefined) body.top_p = ir.topP;
  if (ir.stop !== undefined) body.stop = ir.stop;
  if (ir.responseFormat) body.response_format = chatResponseFormat(ir.responseFormat);
  if (ir.stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}

type ChatUserPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string } };

function chatResponseFormat(format: IrResponseFormat): Record<string, unknown> {
  if (format.type === "json_object") return { type: "json_object" };
  const { type, ...jsonSchema } = format;
  return { type, json_schema: jsonSchema };
}

function chatMessages(m: IrMessage): Record<string, unknown>[] {
  if (m.role === "system") return [{ role: "system", content: systemText(m) }];
  if (m.role === "assistant") {
    const text = m.content.filter((p) => p.type === "text").map((p) => p.text).join("");
    const calls = m.content.flatMap((p) =>
      p.type === "tool_call"
        ? [{ id: p.id, type: "function", function: { name: p.name, arguments: p.arguments } }]
        : []
    );
    const msg: Record<string, unknown> = { role: "assistant", content: text || null };
    if (calls.length) msg.tool_calls = calls;
    return [msg];
  }
  const results = m.content.flatMap((p) =>
    p.type === "tool_result"
      ? [{ role: "tool", tool_call_id: p.toolCallId, content: p.content }]
      : []
  );
  const rest = m.content.filter((p) => p.type !== "tool_result");
  if (!rest.length) return results;
  // unsupportedFor has refused every other part a user turn might hold.
  const content = rest.flatMap((p): ChatUserPart[] => {
    if (p.type === "text") return [{ type: "text", text: p.text }];
    if (p.type === "image") {
      return [{ type: "image_url", image_url: { url: `data:${p.mediaType};base64,${p.data}` } }];
    }
    if (p.type === "image_url") return [{ type: "image_url", image_url: { url: p.url } }];
    return [];
  });
  const only = content.length === 1 ? content[0] : undefined;
  return [...results, {
    role: "user",
    content: only && only.type === "text" ? only.text : content,
  }];
}
