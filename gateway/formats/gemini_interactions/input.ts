import { clientError } from "../../runtime/gateway_error.ts";
import { appendAll } from "../../runtime/append_all.ts";
import type { IrMessage, IrNativeFeature, IrPart } from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import {
  optionalBoolean,
  optionalString,
  requireArray,
  requireRecord,
  requireString,
} from "../request_fields.ts";
import { contentText } from "./response.ts";

/** Content item types (a turn's parts) as opposed to step types (whole turns). */
const CONTENT_TYPES = new Set(["text", "image", "audio", "document", "video"]);

/** Where read input lands: the turns, and what only an Interactions upstream can take. */
export interface InputInto {
  out: IrMessage[];
  native: IrNativeFeature[];
}

/**
 * Reads `input`: a string (one user turn), one Content item, a list of Content items (one user
 * turn), or a list of Steps (the conversation so far: `user_input`, `model_output`, `thought`,
 * `function_call`, `function_result`). A list may mix both, Content items joining the user turn
 * they stand in. The older turn shape `{role, content}` is read too. Steps of the provider's own
 * tools (search calls and results, code execution, ...) and media other than images only an
 * Interactions upstream can read.
 */
export function readInput(input: unknown, into: InputInto): void {
  if (input === undefined || input === null) return;
  if (typeof input === "string") {
    push(into, "user", input === "" ? [] : [{ type: "text", text: input }]);
    return;
  }
  if (isRecord(input)) {
    readItem(input, "input", into);
    return;
  }
  requireArray(input, "input").forEach((item, i) => {
    readItem(requireRecord(item, `input[${i}]`), `input[${i}]`, into);
  });
}

function readItem(item: Record<string, unknown>, param: string, into: InputInto): void {
  if (item.type === undefined && item.role !== undefined) return readTurn(item, param, into);
  const type = requireString(item.type, `${param}.type`);
  if (CONTENT_TYPES.has(type)) {
    const part = readContent(item, { param, native: into.native });
    push(into, "user", part ? [part] : []);
    return;
  }
  switch (type) {
    case "user_input":
      push(into, "user", readContents(item.content, { param: `${param}.content`, into }));
      return;
    case "model_output":
      push(into, "assistant", readContents(item.content, { param: `${param}.content`, into }));
      return;
    case "thought": {
      // A thought's signature is Google's alone (others refuse it); its summary is reasoning.
      const text = contentText(item.summary);
      if (text) push(into, "assistant", [{ type: "reasoning", text }]);
      return;
    }
    case "function_call":
      push(into, "assistant", [readCall(item, param)]);
      return;
    case "function_result":
      push(into, "user", [readResult(item, { param, native: into.native })]);
      return;
    default:
      into.native.push({ param: `${param}.type`, what: `a '${type}' step` });
  }
}

/** The older `{role: "user" | "model", content}` turn. */
function readTurn(item: Record<string, unknown>, param: string, into: InputInto): void {
  const role = requireString(item.role, `${param}.role`);
  if (role !== "user" && role !== "model") {
    throw clientError(`'${param}.role' must be user or model`, { param: `${param}.role` });
  }
  const content = typeof item.content === "string"
    ? (item.content === "" ? [] : [{ type: "text" as const, text: item.content }])
    : readContents(item.content, { param: `${param}.content`, into });
  push(into, role === "model" ? "assistant" : "user", content);
}

function readContents(
  value: unknown,
  at: { param: string; into: InputInto },
): IrPart[] {
  if (value === undefined || value === null) return [];
  return requireArray(value, at.param).flatMap((c, i) => {
    const part = readContent(requireRecord(c, `${at.param}[${i}]`), {
      param: `${at.param}[${i}]`,
      native: at.into.native,
    });
    return part ? [part] : [];
  });
}

/** One Content item: text and images are IR parts; audio, documents and video only Google reads. */
function readContent(
  c: Record<string, unknown>,
  at: { param: string; native: IrNativeFeature[] },
): IrPart | null {
  const type = requireString(c.type, `${at.param}.type`);
  if (type === "text") {
    const text = requireString(c.text, `${at.param}.text`);
    return text === "" ? null : { type: "text", text };
  }
  if (type === "image") {
    const data = optionalString(c.data, `${at.param}.data`);
    const uri = optionalString(c.uri, `${at.param}.uri`);
    if (data !== undefined) {
      const mediaType = requireString(c.mime_type, `${at.param}.mime_type`);
      return { type: "image", mediaType, data };
    }
    if (uri !== undefined) return { type: "image_url", url: uri };
    throw clientError(`'${at.param}' must carry 'data' or 'uri'`, { param: at.param });
  }
  at.native.push({ param: `${at.param}.type`, what: `'${type}' content` });
  return null;
}

function readCall(item: Record<string, unknown>, param: string): IrPart {
  const name = requireString(item.name, `${param}.name`);
  const id = requireString(item.id, `${param}.id`);
  const args = item.arguments === undefined || item.arguments === null
    ? {}
    : requireRecord(item.arguments, `${param}.arguments`);
  return { type: "tool_call", id, name, arguments: JSON.stringify(args) };
}

/**
 * A function's result: text as it is, an object as its JSON, a list of Content items as their
 * text (an image among them only Google reads).
 */
function readResult(
  item: Record<string, unknown>,
  at: { param: string; native: IrNativeFeature[] },
): IrPart {
  const { param } = at;
  const toolCallId = requireString(item.call_id, `${param}.call_id`);
  const name = optionalString(item.name, `${param}.name`);
  const isError = optionalBoolean(item.is_error, `${param}.is_error`);
  const result = item.result;
  let content: string;
  if (typeof result === "string") content = result;
  else if (Array.isArray(result)) {
    if (result.some((c) => !isRecord(c) || c.type !== "text")) {
      at.native.push({ param: `${param}.result`, what: "a function result that is not text" });
    }
    content = contentText(result);
  } else if (result === undefined || result === null) content = "";
  else content = JSON.stringify(requireRecord(result, `${param}.result`));
  return {
    type: "tool_result",
    toolCallId,
    ...(name !== undefined ? { name } : {}),
    content,
    ...(isError ? { isError } : {}),
  };
}

/** Adds parts to the conversation: one turn per role, as every provider reads turns. */
function push(into: InputInto, role: IrMessage["role"], content: IrPart[]): void {
  if (!content.length) return;
  const last = into.out.at(-1);
  if (last?.role === role) appendAll(last.content, content);
  else into.out.push({ role, content });
}
