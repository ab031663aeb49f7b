import { boundedModel } from "../bounded_names.ts";
import { supportsBuiltin } from "../builtin_tools.ts";
import { toolArguments } from "../json_guard.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import {
  DEFAULT_RESPONSE_FORMAT_NAME,
  type IrBuiltinTool,
  type IrNativeFeature,
  type IrPart,
  type IrRequest,
  type IrResponseFormat,
  type IrTool,
  type IrToolChoice,
} from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import {
  optionalBoolean,
  optionalNumber,
  optionalString,
  optionalStringList,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { hasSubstance } from "../gemini/fields.ts";
import { lowerCaseSchemaTypes } from "../gemini/schema.ts";
import { type ConversationTurn, foldSystemTurns } from "../system_turns.ts";
import { type InputInto, readInput } from "./input.ts";
import { interactionsContinuations } from "./continuations.ts";

type Json = Record<string, unknown>;

function unsupported(message: string, param: string) {
  return clientError(message, { param, code: "gw.client.unsupported" });
}

/**
 * Reads a `POST /v1beta/interactions` body (a model interaction) into the gateway's request.
 *
 * Settings that only tune an answer (`thinking_level`, `thinking_summaries`, `seed`,
 * `safety_settings`, `service_tier`, `labels`) are carried by same-format pass-through and left
 * out of translations. What the IR cannot carry is recorded in `nativeOnly`, so only an
 * Interactions upstream is tried: a stored conversation (`previous_interaction_id`), which only
 * the upstream that stored it holds (`providerState`, docs/interactions.md "Stored interactions"),
 * background runs, continuation tokens, cached content, environments, webhooks, the provider's
 * own tools, media other than images, non-text output. An agent interaction is refused: the
 * gateway routes by model.
 */
export function parseInteractionsRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  if (hasSubstance(b.agent) || hasSubstance(b.agent_config)) {
    throw unsupported(
      "agent interactions ('agent') are not served: name a model, one of this gateway's routes",
      "agent",
    );
  }
  const model = boundedModel(requireString(b.model, "model"));
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const native: IrNativeFeature[] = [];
  const builtins: IrBuiltinTool[] = [];
  const continues = optionalString(b.previous_interaction_id, "previous_interaction_id");
  readNativeOnly(b, { native, continues });
  const into: InputInto = { out: [], native };
  readInput(b.input, into);
  if (!into.out.length && continues === undefined && !hasSubstance(b.continuation_token)) {
    throw clientError("'input' must hold something to answer", { param: "input" });
  }
  const config = b.generation_config === undefined || b.generation_config === null
    ? {}
    : requireRecord(b.generation_config, "generation_config");
  readNativeConfig(config, native);
  const system = optionalString(b.system_instruction, "system_instruction");
  const continuations = interactionsContinuations(b);
  return {
    model,
    ...(system ? { system } : {}),
    messages: into.out,
    tools: readTools(b.tools, { native, builtins }),
    ...(builtins.length ? { builtinTools: builtins } : {}),
    toolChoice: readToolChoice(config.tool_choice, native),
    maxTokens: optionalNumber(config.max_output_tokens, "generation_config.max_output_tokens"),
    temperature: optionalNumber(config.temperature, "generation_config.temperature"),
    topP: optionalNumber(config.top_p, "generation_config.top_p"),
    stop: optionalStringList(config.stop_sequences, "generation_config.stop_sequences"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    responseFormat: readResponseFormat(b, native),
    ...(native.length ? { nativeOnly: native } : {}),
    providerState: {
      ...(continues !== undefined ? { continues } : {}),
      stores: optionalBoolean(b.store, "store") ?? true,
    },
    ...(continuations.length ? { continuations } : {}),
    // A continuation token works with `store` off too (docs/interactions.md "Sources").
    answerContinues: true,
  };
}

/** Top-level fields that change what the answer is and have no IR slot. */
function readNativeOnly(b: Json, opts: { native: IrNativeFeature[]; continues?: string }): void {
  const { native } = opts;
  if (opts.continues !== undefined) {
    native.push({
      param: "previous_interaction_id",
      what: "a stored previous interaction ('previous_interaction_id')",
    });
  }
  const stateful: [string, string][] = [
    ["continuation_token", "a continuation of a stored decode ('continuation_token')"],
    ["cached_content", "cached content ('cached_content')"],
    ["environment", "an environment ('environment')"],
    ["webhook_config", "webhook events ('webhook_config')"],
  ];
  for (const [field, what] of stateful) {
    if (hasSubstance(b[field])) native.push({ param: field, what });
  }
  if (optionalBoolean(b.background, "background")) {
    native.push({ param: "background", what: "a background interaction ('background')" });
  }
  const modalities = b.response_modalities;
  if (Array.isArray(modalities) && modalities.some((m) => String(m).toUpperCase() !== "TEXT")) {
    native.push({ param: "response_modalities", what: "non-text output ('response_modalities')" });
  }
}

function readNativeConfig(config: Json, native: IrNativeFeature[]): void {
  for (const field of ["speech_config", "image_config", "video_config", "transcription_config"]) {
    if (hasSubstance(config[field])) {
      native.push({ param: `generation_config.${field}`, what: `'${field}'` });
    }
  }
}

/** Google's own tools other providers' web search stands in for. */
const SEARCH_TOOLS = new Set(["google_search"]);

function readTools(
  value: unknown,
  into: { native: IrNativeFeature[]; builtins: IrBuiltinTool[] },
): IrTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").flatMap((t, i): IrTool[] => {
    const param = `tools[${i}]`;
    const tool = requireRecord(t, param);
    const type = requireString(tool.type, `${param}.type`);
    if (type === "function") {
      const parameters = isRecord(tool.parameters)
        ? lowerCaseSchemaTypes(tool.parameters)
        : { type: "object", properties: {} };
      return [{
        name: requireString(tool.name, `${param}.name`),
        description: optionalString(tool.description, `${param}.description`),
        parameters: isRecord(parameters) ? parameters : { type: "object", properties: {} },
      }];
    }
    if (SEARCH_TOOLS.has(type) && !hasSubstance(tool.search_types)) {
      into.builtins.push({ type: "web_search", param });
    } else {
      into.native.push({ param: `${param}.type`, what: `server tool '${type}'` });
    }
    return [];
  });
}

/**
 * `generation_config.tool_choice`: `auto`, `any` (a call is required), `none`, `validated` (auto,
 * with calls held to their schema), or `{allowed_tools: {mode, tools}}`.
 */
function readToolChoice(value: unknown, native: IrNativeFeature[]): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  const param = "generation_config.tool_choice";
  if (typeof value === "string") return choiceOfMode(value, param);
  const choice = requireRecord(value, param);
  if (choice.allowed_tools === undefined || choice.allowed_tools === null) return undefined;
  const allowed = requireRecord(choice.allowed_tools, `${param}.allowed_tools`);
  const mode = optionalString(allowed.mode, `${param}.allowed_tools.mode`) ?? "auto";
  const tools = optionalStringList(allowed.tools, `${param}.allowed_tools.tools`) ?? [];
  const base = choiceOfMode(mode, `${param}.allowed_tools.mode`);
  if (base !== "required" || tools.length === 0) {
    if (tools.length) {
      native.push({ param: `${param}.allowed_tools.tools`, what: "a list of allowed tools" });
    }
    return base;
  }
  if (tools.length === 1) return { name: tools[0]! };
  native.push({ param: `${param}.allowed_tools.tools`, what: "more than one allowed tool" });
  return "required";
}

function choiceOfMode(mode: string, param: string): IrToolChoice {
  switch (mode) {
    case "auto":
    case "validated":
      return "auto";
    case "any":
      return "required";
    case "none":
      return "none";
    default:
      throw clientError(`'${param}' must be auto, any, none or validated`, { param });
  }
}

/**
 * `response_format`: a text format of MIME type `application/json`, held to `schema` when it has
 * one; the deprecated form is the schema itself with `response_mime_type: application/json`.
 * Audio, image and video formats only Google can honour.
 */
function readResponseFormat(b: Json, native: IrNativeFeature[]): IrResponseFormat | undefined {
  const value = b.response_format;
  const legacyMime = optionalString(b.response_mime_type, "response_mime_type");
  if (value === undefined || value === null) {
    if (legacyMime === "application/json") return { type: "json_object" };
    if (legacyMime !== undefined && legacyMime !== "text/plain") {
      native.push({ param: "response_mime_type", what: `response MIME type '${legacyMime}'` });
    }
    return undefined;
  }
  const formats = Array.isArray(value) ? value : [value];
  let found: IrResponseFormat | undefined;
  formats.forEach((f, i) => {
    const param = Array.isArray(value) ? `response_format[${i}]` : "response_format";
    const format = requireRecord(f, param);
    if (format.type === undefined) {
      // The deprecated form: the schema itself, JSON by `response_mime_type`.
      if (legacyMime === "application/json") found = jsonFormat(format);
      else native.push({ param, what: "a response schema without JSON mode" });
      return;
    }
    const type = requireString(format.type, `${param}.type`);
    if (type !== "text") {
      native.push({ param: `${param}.type`, what: `'${type}' output` });
      return;
    }
    const mime = optionalString(format.mime_type, `${param}.mime_type`);
    if (mime === "application/json") {
      found = isRecord(format.schema) ? jsonFormat(format.schema) : { type: "json_object" };
    } else if (mime !== undefined && mime !== "text/plain") {
      native.push({ param: `${param}.mime_type`, what: `response MIME type '${mime}'` });
    }
  });
  return found;
}

function jsonFormat(schema: Json): IrResponseFormat {
  return {
    type: "json_schema",
    name: DEFAULT_RESPONSE_FORMAT_NAME,
    schema: lowerCaseSchemaTypes(schema) as Json,
  };
}

/** Everything the IR carries has an Interactions form. */
export function unsupportedFor(_ir: IrRequest): string[] {
  return [];
}

/**
 * Writes the gateway's request as an Interactions body for `model`: the whole conversation as
 * input steps, and `store: false`, since a translated request carries its history itself and
 * nothing is ever read back by id (docs/interactions.md "Stored interactions").
 */
export function interactionsRequestBody(ir: IrRequest, model: string): Json {
  const body: Json = {
    model,
    input: foldSystemTurns(ir.messages).flatMap((m, i) => inputSteps(m, `messages[${i}]`)),
    store: false,
  };
  if (ir.stream) body.stream = true;
  if (ir.system !== undefined) body.system_instruction = ir.system;
  const tools: Json[] = (ir.tools ?? []).map((t) => ({
    type: "function",
    name: t.name,
    description: t.description,
    parameters: t.parameters,
  }));
  // Built-ins it lacks were dropped by the route's choice (the engine skips the candidate otherwise).
  if (ir.builtinTools?.some((t) => supportsBuiltin("gemini-interactions", t))) {
    tools.push({ type: "google_search" });
  }
  if (tools.length) body.tools = tools;
  const config: Json = {};
  if (ir.maxTokens !== undefined) config.max_output_tokens = ir.maxTokens;
  if (ir.temperature !== undefined) config.temperature = ir.temperature;
  if (ir.topP !== undefined) config.top_p = ir.topP;
  if (ir.stop !== undefined) config.stop_sequences = ir.stop;
  if (ir.toolChoice !== undefined) config.tool_choice = toolChoiceOf(ir.toolChoice);
  if (Object.keys(config).length) body.generation_config = config;
  if (ir.responseFormat) {
    body.response_format = {
      type: "text",
      mime_type: "application/json",
      ...(ir.responseFormat.type === "json_schema" ? { schema: ir.responseFormat.schema } : {}),
    };
  }
  return body;
}

function toolChoiceOf(choice: IrToolChoice): unknown {
  if (choice === "auto" || choice === "none") return choice;
  if (choice === "required") return "any";
  return { allowed_tools: { mode: "any", tools: [choice.name] } };
}

/**
 * One turn as input steps: a user turn's text and images as one `user_input` step (its tool
 * results as `function_result` steps), an answer's text as `model_output` and its calls as
 * `function_call` steps. Earlier reasoning is not sent: a thought is only taken with Google's
 * own signature.
 */
function inputSteps(m: ConversationTurn, param: string): Json[] {
  const steps: Json[] = [];
  let content: Json[] = [];
  const flush = () => {
    if (!content.length) return;
    steps.push({ type: m.role === "assistant" ? "model_output" : "user_input", content });
    content = [];
  };
  m.content.forEach((p, i) => {
    const item = contentItem(p);
    if (item) return void content.push(item);
    const step = stepOf(p, `${param}.content[${i}]`);
    if (!step) return;
    flush();
    steps.push(step);
  });
  flush();
  return steps;
}

function contentItem(p: IrPart): Json | null {
  switch (p.type) {
    case "text":
    case "refusal":
      return p.text === "" ? null : { type: "text", text: p.text };
    case "image":
      return { type: "image", data: p.data, mime_type: p.mediaType };
    case "image_url":
      return { type: "image", uri: p.url };
    default:
      return null;
  }
}

function stepOf(p: IrPart, param: string): Json | null {
  if (p.type === "tool_call") {
    return {
      type: "function_call",
      id: p.id,
      name: p.name,
      arguments: toolArguments(p, `${param}.arguments`),
    };
  }
  if (p.type === "tool_result") {
    return {
      type: "function_result",
      call_id: p.toolCallId,
      ...(p.name !== undefined ? { name: p.name } : {}),
      result: p.content,
      ...(p.isError ? { is_error: true } : {}),
    };
  }
  return null;
}
