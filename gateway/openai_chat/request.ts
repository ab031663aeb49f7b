import { clientError } from "../gateway_error.ts";
import type { IrMessage, IrPart, IrRequest, IrTool, IrToolChoice } from "../ir.ts";
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
import { isRecord } from "../sse_frames.ts";

/** Reads a Chat Completions body into the gateway's request. */
export function parseChatRequest(body: unknown): IrRequest {
  const b = requireRecord(body, "body");
  const model = requireString(b.model, "model");
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const messages = requireArray(b.messages, "messages");
  const system: string[] = [];
  const out: IrMessage[] = [];
  messages.forEach((m, i) => readMessage(m, `messages[${i}]`, { system, out }));
  return {
    model,
    system: system.length ? system.join("\n\n") : undefined,
    messages: out,
    tools: readTools(b.tools),
    toolChoice: readToolChoice(b.tool_choice),
    maxTokens: optionalNumber(b.max_completion_tokens, "max_completion_tokens") ??
      optionalNumber(b.max_tokens, "max_tokens"),
    temperature: optionalNumber(b.temperature, "temperature"),
    topP: optionalNumber(b.top_p, "top_p"),
    stop: optionalStringList(b.stop, "stop"),
    stream: optionalBoolean(b.stream, "stream") ?? false,
    sessionHint: optionalString(b.prompt_cache_key, "prompt_cache_key") ??
      optionalString(b.user, "user"),
  };
}

function readMessage(
  value: unknown,
  param: string,
  into: { system: string[]; out: IrMessage[] },
): void {
  const m = requireRecord(value, param);
  const role = requireString(m.role, `${param}.role`);
  if (role === "system" || role === "developer") {
    into.system.push(textOf(m.content, `${param}.content`));
  } else if (role === "user") {
    into.out.push({ role: "user", content: readParts(m.content, `${param}.content`) });
  } else if (role === "assistant") {
    into.out.push({ role: "assistant", content: readAssistant(m, param) });
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

function readAssistant(m: Record<string, unknown>, param: string): IrPart[] {
  const parts: IrPart[] = m.content === undefined || m.content === null
    ? []
    : readParts(m.content, `${param}.content`);
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

function readParts(content: unknown, param: string): IrPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return requireArray(content, param).map((p, i) => {
    const at = `${param}[${i}]`;
    const part = requireRecord(p, at);
    if (part.type === "text") return { type: "text", text: requireString(part.text, `${at}.text`) };
    if (part.type === "image_url") {
      const image = requireRecord(part.image_url, `${at}.image_url`);
      return imageFromUrl(requireString(image.url, `${at}.image_url.url`));
    }
    if (part.type === "refusal") {
      return { type: "refusal", text: requireString(part.refusal, `${at}.refusal`) };
    }
    throw clientError(`content part type '${String(part.type)}' is not supported`, {
      param: `${at}.type`,
      code: "gw.client.unsupported",
    });
  });
}

function textOf(content: unknown, param: string): string {
  return readParts(content, param).map((p) => {
    if (p.type !== "text") throw clientError(`'${param}' must be text`, { param });
    return p.text;
  }).join("");
}

function readTools(value: unknown): IrTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  return requireArray(value, "tools").map((t, i) => {
    const tool = requireRecord(t, `tools[${i}]`);
    if (tool.type !== "function") {
      throw clientError(`tool type '${String(tool.type)}' is not supported`, {
        param: `tools[${i}].type`,
        code: "gw.client.unsupported",
      });
    }
    const fn = requireRecord(tool.function, `tools[${i}].function`);
    return {
      name: requireString(fn.name, `tools[${i}].function.name`),
      description: optionalString(fn.description, `tools[${i}].function.description`),
      parameters: isRecord(fn.parameters) ? fn.parameters : { type: "object", properties: {} },
    };
  });
}

function readToolChoice(value: unknown): IrToolChoice | undefined {
  if (value === undefined || value === null) return undefined;
  if (value === "auto" || value === "none" || value === "required") return value;
  const choice = requireRecord(value, "tool_choice");
  const fn = requireRecord(choice.function, "tool_choice.function");
  return { name: requireString(fn.name, "tool_choice.function.name") };
}

/** Writes the gateway's request as a Chat Completions body for `model`. */
export function chatRequestBody(ir: IrRequest, model: string): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  if (ir.system !== undefined) messages.push({ role: "system", content: ir.system });
  for (const m of ir.messages) messages.push(...chatMessages(m));
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
  if (ir.maxTokens !== undefined) body.max_tokens = ir.maxTokens;
  if (ir.temperature !== undefined) body.temperature = ir.temperature;
  if (ir.topP !== undefined) body.top_p = ir.topP;
  if (ir.stop !== undefined) body.stop = ir.stop;
  if (ir.stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}

function chatMessages(m: IrMessage): Record<string, unknown>[] {
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
  const content = rest.map((p) => {
    if (p.type === "text") return { type: "text", text: p.text };
    if (p.type === "image") {
      return { type: "image_url", image_url: { url: `data:${p.mediaType};base64,${p.data}` } };
    }
    if (p.type === "image_url") return { type: "image_url", image_url: { url: p.url } };
    throw clientError(`a ${p.type} part cannot be sent to a Chat Completions upstream`, {
      code: "gw.client.unsupported",
    });
  });
  const only = content.length === 1 ? content[0] : undefined;
  return [...results, {
    role: "user",
    content: only && only.type === "text" ? only.text : content,
  }];
}
