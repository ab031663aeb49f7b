import { boundedModel, echoed } from "../bounded_names.ts";
import { toolArguments, toolResultJson } from "../json_guard.ts";
import type { ClientRequestContext } from "../format.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { appendAll } from "../../runtime/append_all.ts";
import { supportsBuiltin } from "../builtin_tools.ts";
import {
  DEFAULT_RESPONSE_FORMAT_NAME,
  type IrBuiltinTool,
  type IrMessage,
  type IrNativeFeature,
  type IrPart,
  type IrRequest,
  type IrResponseFormat,
  type IrTool,
  type IrToolChoice,
} from "../ir.ts";
import {
  optionalNumber,
  optionalString,
  optionalStringList,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { isRecord } from "../../runtime/json.ts";
import { camelCase, field, hasSubstance } from "./fields.ts";
import { geminiSchemaToJson, lowerCaseSchemaTypes } from "./schema.ts";
import { type ConversationTurn, foldSystemTurns } from "../system_turns.ts";

/**
 * Gemini 3 rejects a replayed functionCall without the thought signature it
 * was issued with; history translated from another provider has none, and
 * Google documents this value for exactly that case.
 */
export const FOREIGN_THOUGHT_SIGNATURE = "skip_thought_signature_validator";

/**
 * Reads a generateContent body; the model and streaming come from the URL.
 *
 * Sampling knobs and settings that only tune an answer (`topK`, `seed`,
 * penalties, `thinkingConfig`, `safetySettings`, `mediaResolution`) are
 * carried by same-format pass-through and left out of translations. What
 * changes the answer and has no IR slot (server tools, a server-side cache,
 * several candidates, audio or image output, PDFs and other non-image
 * data, code execution parts) is recorded in `nativeOnly`, so only a Gemini
 * upstream is tried. JSON mode and response schemas are `responseFormat`.
 */
export function parseGeminiRequest(body: unknown, ctx: ClientRequestContext): IrRequest {
  const b = requireRecord(body, "body");
  const model = boundedModel((ctx.pathModel ?? "").replace(/^models\//, ""));
  if (model === "") {
    const where = "the model must be named in the URL: /v1beta/models/{model}:generateContent";
    throw clientError(where, { param: "model" });
  }
  const gen = field(b, "generationConfig") ?? {};
  const config = requireRecord(gen, "generationConfig");
  const native: IrNativeFeature[] = [];
  const builtins: IrBuiltinTool[] = [];
  readNativeOnly(b, { config, native });
  const ledger = new CallLedger(native);
  const messages = mergeTurns(
    requireArray(field(b, "contents"), "contents")
      .map((c, i) => readContent(c, `contents[${i}]`, ledger))
      .filter((m): m is IrMessage => m !== null),
  );
  return {
    model,
    system: readSystem(field(b, "systemInstruction"), native),
    messages,
    tools: readTools(b.tools, { native, builtins }),
    ...(builtins.length ? { builtinTools: builtins } : {}),
    toolChoice: readToolChoice(field(b, "toolConfig"), native),
    maxTokens: optionalNumber(field(config, "maxOutputTokens"), "generationConfig.maxOutputTokens"),
    temperature: optionalNumber(config.temperature, "generationConfig.temperature"),
    topP: optionalNumber(field(config, "topP"), "generationConfig.topP"),
    stop: optionalStringList(field(config, "stopSequences"), "generationConfig.stopSequences"),
    stream: ctx.pathStream === true,
    responseFormat: readResponseFormat(config, native),
    ...(native.length ? { nativeOnly: native } : {}),
  };
}

/** Top-level and generationConfig fields that change what the answer is. */
function readNativeOnly(
  b: Record<string, unknown>,
  opts: { config: Record<string, unknown>; native: IrNativeFeature[] },
): void {
  const { config, native } = opts;
  const add = (param: string, what = `'${param}'`) => native.push({ param, what });
  if (hasSubstance(field(b, "cachedContent"))) {
    add("cachedContent", "cached content ('cachedContent')");
  }
  const count = optionalNumber(field(config, "candidateCount"), "generationConfig.candidateCount");
  if (count !== undefined && count > 1) {
    add("generationConfig.candidateCount", "several candidates ('candidateCount')");
  }
  if (hasSubstance(field(config, "speechConfig"))) add("generationConfig.speechConfig");
  const modalities = field(config, "responseModalities");
  if (Array.isArray(modalities) && modalities.some((m) => String(m).toUpperCase() !== "TEXT")) {
    add("generationConfig.responseModalities", "non-text output ('responseModalities')");
  }
  if (field(config, "responseLogprobs") === true) {
    add("generationConfig.responseLogprobs", "log probabilities ('responseLogprobs')");
  }
}

/**
 * JSON mode is `responseMimeType: "application/json"`, held to a schema by
 * `responseJsonSchema` (JSON Schema) or `responseSchema` (Gemini's OpenAPI
 * subset, converted). Other MIME types (`text/x.enum`) are Gemini's alone.
 */
function readResponseFormat(
  config: Record<string, unknown>,
  native: IrNativeFeature[],
): IrResponseFormat | undefined {
  const param = "generationConfig.responseMimeType";
  const mime = optionalString(field(config, "responseMimeType"), param);
  const json = field(config, "responseJsonSchema");
  const openApi = field(config, "responseSchema");
  if (mime !== "application/json") {
    if (mime !== undefined && mime !== "text/plain") {
      native.push({ param, what: `response MIME type '${mime}'` });
    } else if (hasSubstance(json) || hasSubstance(openApi)) {
      // Gemini itself refuses a schema without JSON mode: let it say so.
      native.push({ param, what: "a response schema without JSON mode" });
    }
    return undefined;
  }
  const schema = hasSubstance(json)
    ? lowerCaseSchemaTypes(requireRecord(json, "generationConfig.responseJsonSchema"))
    : hasSubstance(openApi)
    ? geminiSchemaToJson(requireRecord(openApi, "generationConfig.responseSchema"))
    : undefined;
  if (!isRecord(schema)) return { type: "json_object" };
  return { type: "json_schema", name: DEFAULT_RESPONSE_FORMAT_NAME, schema };
}

/**
 * Pairs function responses with the calls they answer. Gemini may omit ids,
 * matching by name and order instead, so calls get ids here and each response
 * takes the id of the earliest unanswered call of its name.
 */
class CallLedger {
  #next = 0;
  #open: { id: string; name: string }[] = [];

  /** What only Gemini can take, recorded while the contents are read. */
  constructor(readonly native: IrNativeFeature[]) {}

  call(id: string | undefined, name: string): string {
    const callId = id || this.#fresh();
    this.#open.push({ id: callId, name });
    return callId;
  }

  answer(id: string | undefined, name: string): string {
    const at = this.#open.findIndex((c) => (id ? c.id === id : c.name === name));
    if (at < 0) return id || this.#fresh();
    const [match] = this.#open.splice(at, 1);
    return match?.id ?? this.#fresh();
  }

  #fresh(): string {
    return `call_${this.#next++}`;
  }
}

function readContent(value: unknown, param: string, ledger: CallLedger): IrMessage | null {
  const c = requireRecord(value, param);
  const role = optionalString(c.role, `${param}.role`) ?? "user";
  if (role !== "user" && role !== "model" && role !== "function") {
    throw clientError(`'${param}.role' must be user or model`, { param: `${param}.role` });
  }
  const content = requireArray(c.parts, `${param}.parts`)
    .map((p, i) => readPart(p, `${param}.parts[${i}]`, ledger))
    .filter((p): p is IrPart => p !== null);
  if (!content.length) return null;
  return { role: role === "model" ? "assistant" : "user", content };
}

/**
 * Google's SDK records a streamed answer as one model content per chunk;
 * Gemini reads consecutive contents of one role as one turn, and so must
 * providers that insist on alternating turns.
 */
function mergeTurns(messages: IrMessage[]): IrMessage[] {
  const out: IrMessage[] = [];
  for (const m of messages) {
    const last = out.at(-1);
    if (last?.role === m.role) appendAll(last.content, m.content);
    else out.push({ role: m.role, content: [...m.content] });
  }
  return out;
}

/** Keys a part may carry that need no translation (a signature is Gemini's alone). */
const partExtras = new Set(["thought", "thoughtSignature", "partMetadata", "mediaResolution"]);

function readPart(value: unknown, param: string, ledger: CallLedger): IrPart | null {
  const part = requireRecord(value, param);
  const text = field(part, "text");
  if (text !== undefined) {
    const t = requireString(text, `${param}.text`);
    if (t === "") return null;
    return part.thought === true ? { type: "reasoning", text: t } : { type: "text", text: t };
  }
  const inline = field(part, "inlineData");
  if (inline !== undefined) {
    return readInline(inline, { param: `${param}.inlineData`, native: ledger.native });
  }
  const file = field(part, "fileData");
  if (file !== undefined) {
    return readFile(file, { param: `${param}.fileData`, native: ledger.native });
  }
  const call = field(part, "functionCall");
  if (call !== undefined) return readCall(call, `${param}.functionCall`, ledger);
  const response = field(part, "functionResponse");
  if (response !== undefined) return readResponse(response, `${param}.functionResponse`, ledger);
  // executableCode, codeExecutionResult, videoMetadata, ...: Gemini's own.
  const other = Object.keys(part).find((k) => !partExtras.has(camelCase(k)));
  if (other !== undefined) {
    ledger.native.push({ param: `${param}.${other}`, what: `a '${other}' part` });
  }
  return null;
}

interface DataAt {
  param: string;
  /** Where data only Gemini reads is recorded. */
  native: IrNativeFeature[];
}

/** Images are IR parts; other data (PDF, audio, video) only Gemini reads. */
function readInline(value: unknown, at: DataAt): IrPart | null {
  const { param } = at;
  const inline = requireRecord(value, param);
  const mediaType = requireString(field(inline, "mimeType"), `${param}.mimeType`);
  const data = requireString(inline.data, `${param}.data`);
  if (mediaType.startsWith("image/")) return { type: "image", mediaType, data };
  at.native.push({ param: `${param}.mimeType`, what: `inline data of type '${mediaType}'` });
  return null;
}

function readFile(value: unknown, at: DataAt): IrPart | null {
  const { param } = at;
  const file = requireRecord(value, param);
  const mediaType = optionalString(field(file, "mimeType"), `${param}.mimeType`);
  const url = requireString(field(file, "fileUri"), `${param}.fileUri`);
  if (mediaType === undefined || mediaType.startsWith("image/")) return { type: "image_url", url };
  at.native.push({ param: `${param}.mimeType`, what: `file data of type '${mediaType}'` });
  return null;
}

function readCall(value: unknown, param: string, ledger: CallLedger): IrPart {
  const call = requireRecord(value, param);
  const name = requireString(call.name, `${param}.name`);
  const args = call.args === undefined || call.args === null
    ? {}
    : requireRecord(call.args, `${param}.args`);
  const id = ledger.call(optionalString(call.id, `${param}.id`), name);
  return { type: "tool_call", id, name, arguments: JSON.stringify(args) };
}

function readResponse(value: unknown, param: string, ledger: CallLedger): IrPart {
  const res = requireRecord(value, param);
  if (hasSubstance(res.parts)) {
    ledger.native.push({ param: `${param}.parts`, what: "a multimodal function response" });
  }
  const name = requireString(res.name, `${param}.name`);
  const response = res.response === undefined || res.response === null
    ? {}
    : requireRecord(res.response, `${param}.response`);
  const toolCallId = ledger.answer(optionalString(res.id, `${param}.id`), name);
  return { type: "tool_result", toolCallId, name, ...resultContent(response) };
}

/**
 * Google's convention is `{output}` for a result and `{error}` for a failure;
 * those unwrap to plain text so other providers see what the tool said.
 */
function resultContent(response: Record<string, unknown>): { content: string; isError?: boolean } {
  const keys = Object.keys(response);
  const only = keys.length === 1 ? keys[0] : undefined;
  const text = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));
  if (only === "output") return { content: text(response.output) };
  if (only === "error") return { content: text(response.error), isError: true };
  return { content: JSON.stringify(response) };
}

function readSystem(value: unknown, native: IrNativeFeature[]): string | undefined {
  if (value === undefined || value === null) return undefined;
  const c = requireRecord(value, "systemInstruction");
  const texts = requireArray(c.parts, "systemInstruction.parts").flatMap((p, i) => {
    const at = `systemInstruction.parts[${i}]`;
    const part = requireRecord(p, at);
    if (part.text === undefined) {
      native.push({ param: at, what: "a system instruction part that is not text" });
      return [];
    }
    return [requireString(part.text, `${at}.text`)];
  });
  return texts.join("\n");
}

/** Gemini's search tools, which other providers' web search tools stand in for. */
const searchTools = new Set(["googleSearch", "googleSearchRetrieval"]);

function readTools(
  value: unknown,
  into: { native: IrNativeFeature[]; builtins: IrBuiltinTool[] },
): IrTool[] | undefined {
  const { native } = into;
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").flatMap((t, i) => {
    const tool = requireRecord(t, `tools[${i}]`);
    const declarations: IrTool[] = [];
    for (const [key, v] of Object.entries(tool)) {
      if (key === "functionDeclarations" || key === "function_declarations") {
        requireArray(v, `tools[${i}].${key}`).forEach((d, j) => {
          declarations.push(readDeclaration(d, `tools[${i}].functionDeclarations[${j}]`));
        });
      } else if (v !== undefined && v !== null && searchTools.has(camelCase(key))) {
        // `{googleSearch: {}}` switches a server tool on: empty is not absent.
        into.builtins.push({ type: "web_search", param: `tools[${i}].${key}` });
      } else if (v !== undefined && v !== null) {
        native.push({ param: `tools[${i}].${key}`, what: `server tool '${key}'` });
      }
    }
    return declarations;
  });
}

function readDeclaration(value: unknown, param: string): IrTool {
  const d = requireRecord(value, param);
  const json = field(d, "parametersJsonSchema");
  const openApi = d.parameters;
  const parameters = isRecord(json)
    ? lowerCaseSchemaTypes(json)
    : isRecord(openApi)
    ? geminiSchemaToJson(openApi)
    : { type: "object", properties: {} };
  return {
    name: requireString(d.name, `${param}.name`),
    description: optionalString(d.description, `${param}.description`),
    parameters: isRecord(parameters) ? parameters : { type: "object", properties: {} },
  };
}

function readToolChoice(value: unknown, native: IrNativeFeature[]): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  const config = requireRecord(value, "toolConfig");
  const calling = field(config, "functionCallingConfig");
  if (calling === undefined || calling === null) return undefined;
  const param = "toolConfig.functionCallingConfig";
  const c = requireRecord(calling, param);
  const mode = optionalString(c.mode, `${param}.mode`) ?? "AUTO";
  const allowed = optionalStringList(
    field(c, "allowedFunctionNames"),
    `${param}.allowedFunctionNames`,
  );
  if (mode === "NONE") return "none";
  if (mode === "ANY") {
    if (!allowed?.length) return "required";
    if (allowed.length === 1 && allowed[0] !== undefined) return { name: allowed[0] };
    native.push({
      param: `${param}.allowedFunctionNames`,
      what: "more than one allowed function name",
    });
    return "required";
  }
  if (mode === "AUTO" || mode === "VALIDATED" || mode === "MODE_UNSPECIFIED") return "auto";
  throw clientError(`'${param}.mode' must be AUTO, ANY, NONE or VALIDATED`, {
    param: `${param}.mode`,
  });
}

/** Everything the IR carries has a generateContent form. */
export function unsupportedFor(_ir: IrRequest): string[] {
  return [];
}

/** Writes the gateway's request as a generateContent body (the model goes in the URL). */
export function geminiRequestBody(ir: IrRequest): Record<string, unknown> {
  const names = new Map<string, string>();
  const contents = foldSystemTurns(ir.messages)
    .map((m, i) => geminiContent(m, { names, param: `messages[${i}]` }))
    .filter((c) => c.parts.length > 0);
  const body: Record<string, unknown> = { contents };
  if (ir.system !== undefined) body.systemInstruction = { parts: [{ text: ir.system }] };
  const tools: Record<string, unknown>[] = [];
  if (ir.tools?.length) {
    tools.push({
      functionDeclarations: ir.tools.map((t) => ({
        name: t.name,
        description: t.description,
        // JSON Schema as-is: `parameters` would reject keywords outside OpenAPI 3.0.
        parametersJsonSchema: t.parameters,
      })),
    });
  }
  // Built-ins Gemini lacks were dropped by the route's choice (the engine skips the candidate otherwise).
  if (ir.builtinTools?.some((t) => supportsBuiltin("gemini", t))) tools.push({ googleSearch: {} });
  if (tools.length) body.tools = tools;
  if (ir.toolChoice !== undefined) {
    body.toolConfig = { functionCallingConfig: functionCallingConfig(ir.toolChoice) };
  }
  const generationConfig: Record<string, unknown> = {};
  if (ir.maxTokens !== undefined) generationConfig.maxOutputTokens = ir.maxTokens;
  if (ir.temperature !== undefined) generationConfig.temperature = ir.temperature;
  if (ir.topP !== undefined) generationConfig.topP = ir.topP;
  if (ir.stop !== undefined) generationConfig.stopSequences = ir.stop;
  if (ir.responseFormat) {
    generationConfig.responseMimeType = "application/json";
    // JSON Schema as-is, as for tools; Gemini has no name or strict flag (it always holds to it).
    if (ir.responseFormat.type === "json_schema") {
      generationConfig.responseJsonSchema = ir.responseFormat.schema;
    }
  }
  if (Object.keys(generationConfig).length) body.generationConfig = generationConfig;
  return body;
}

function functionCallingConfig(choice: IrToolChoice): Record<string, unknown> {
  if (choice === "auto") return { mode: "AUTO" };
  if (choice === "none") return { mode: "NONE" };
  if (choice === "required") return { mode: "ANY" };
  return { mode: "ANY", allowedFunctionNames: [choice.name] };
}

interface ContentOpts {
  /** Function names by call id, filled as the history is walked. */
  names: Map<string, string>;
  param: string;
}

function geminiContent(m: ConversationTurn, opts: ContentOpts): { role: string; parts: unknown[] } {
  const parts = m.content.flatMap((p, i) =>
    geminiPart(p, { ...opts, param: `${opts.param}.content[${i}]` })
  );
  return { role: m.role === "assistant" ? "model" : "user", parts };
}

/**
 * Ids are not sent: Gemini pairs calls and responses by name and order, and
 * some of its endpoints reject an `id` they did not issue. Earlier reasoning
 * is not sent either: Gemini takes no thought text as input.
 */
function geminiPart(p: IrPart, opts: ContentOpts): Record<string, unknown>[] {
  switch (p.type) {
    case "text":
    case "refusal":
      return p.text === "" ? [] : [{ text: p.text }];
    case "reasoning":
      return [];
    case "image":
      return [{ inlineData: { mimeType: p.mediaType, data: p.data } }];
    case "image_url":
      return [{ fileData: { mimeType: imageTypeOf(p.url), fileUri: p.url } }];
    case "tool_call":
      opts.names.set(p.id, p.name);
      return [{
        functionCall: {
          name: p.name,
          args: toolArguments(p, `${opts.param}.arguments`),
        },
        thoughtSignature: FOREIGN_THOUGHT_SIGNATURE,
      }];
    case "tool_result": {
      const name = opts.names.get(p.toolCallId) ?? p.name;
      if (name === undefined) {
        throw clientError(`tool result ${echoed(p.toolCallId)} answers no earlier tool call`, {
          param: `${opts.param}.tool_call_id`,
        });
      }
      return [{ functionResponse: { name, response: resultObject(p) } }];
    }
  }
}

/** A tool's text as the object Gemini's functionResponse.response must be. */
function resultObject(p: Extract<IrPart, { type: "tool_result" }>): Record<string, unknown> {
  const parsed = toolResultJson(p);
  if (p.isError) return { error: parsed ?? p.content };
  return isRecord(parsed) ? parsed : { output: parsed ?? p.content };
}

const imageTypes: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  heic: "image/heic",
  heif: "image/heif",
};

/** fileData wants a MIME type; a URL only hints at it, and JPEG is the common case. */
function imageTypeOf(url: string): string {
  const ext = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(url)?.[1]?.toLowerCase();
  return (ext && imageTypes[ext]) || "image/jpeg";
}

/** The URL path of a model: bare names live under `models/`, tuned ones carry their own. */
export function geminiModelPath(model: string): string {
  return model.includes("/") ? model : `models/${model}`;
}
