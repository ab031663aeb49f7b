import { answerTime, type ClientRequestContext } from "../format.ts";
import { badResponse } from "../upstream_error.ts";
import {
  cacheWrites,
  type IrFinishReason,
  type IrPart,
  type IrResponse,
  type IrUsage,
} from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";

const finishFromChat: Record<string, IrFinishReason> = {
  stop: "stop",
  length: "length",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  content_filter: "content_filter",
};

export function chatFinishToIr(reason: unknown): IrFinishReason {
  return typeof reason === "string" ? finishFromChat[reason] ?? "stop" : "stop";
}

export function chatUsageToIr(usage: unknown): IrUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const num = (v: unknown) => (typeof v === "number" ? v : undefined);
  const prompt = isRecord(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const completion = isRecord(usage.completion_tokens_details)
    ? usage.completion_tokens_details
    : {};
  return {
    inputTokens: num(usage.prompt_tokens),
    outputTokens: num(usage.completion_tokens),
    cachedTokens: num(prompt.cached_tokens),
    reasoningTokens: num(completion.reasoning_tokens),
    // Part of prompt_tokens, like the cached ones (docs/observability.md "Cache tokens").
    ...cacheWrites(num(prompt.cache_write_tokens)),
  };
}

export function irUsageToChat(usage: IrUsage): Record<string, unknown> {
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
  const out: Record<string, unknown> = {
    prompt_tokens: input,
    completion_tokens: output,
    total_tokens: input + output,
  };
  if (usage.cachedTokens !== undefined || usage.cacheWriteTokens !== undefined) {
    out.prompt_tokens_details = {
      cached_tokens: usage.cachedTokens ?? 0,
      ...(usage.cacheWriteTokens === undefined
        ? {}
        : { cache_write_tokens: usage.cacheWriteTokens }),
    };
  }
  if (usage.reasoningTokens !== undefined) {
    out.completion_tokens_details = { reasoning_tokens: usage.reasoningTokens };
  }
  return out;
}

/** Reads a whole Chat Completions answer. */
export function decodeChatWhole(text: string): IrResponse {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw badResponse("the upstream's answer is not JSON");
  }
  if (!isRecord(body) || !Array.isArray(body.choices)) {
    throw badResponse("the upstream's answer has no choices");
  }
  const choice = isRecord(body.choices[0]) ? body.choices[0] : {};
  const message = isRecord(choice.message) ? choice.message : {};
  const content: IrPart[] = [];
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (typeof reasoning === "string" && reasoning) {
    content.push({ type: "reasoning", text: reasoning });
  }
  if (typeof message.content === "string" && message.content) {
    content.push({ type: "text", text: message.content });
  }
  if (typeof message.refusal === "string" && message.refusal) {
    content.push({ type: "refusal", text: message.refusal });
  }
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    if (!isRecord(call) || !isRecord(call.function)) continue;
    content.push({
      type: "tool_call",
      id: String(call.id ?? ""),
      name: String(call.function.name ?? ""),
      arguments: String(call.function.arguments ?? ""),
    });
  }
  return {
    id: String(body.id ?? ""),
    model: String(body.model ?? ""),
    content,
    finish: chatFinishToIr(choice.finish_reason),
    usage: chatUsageToIr(body.usage) ?? {},
  };
}

const finishToChat: Record<IrFinishReason, string> = {
  stop: "stop",
  length: "length",
  tool_calls: "tool_calls",
  content_filter: "content_filter",
  error: "stop",
};

export function irFinishToChat(reason: IrFinishReason): string {
  return finishToChat[reason];
}

/** Writes a whole answer as a Chat Completions body. */
export function encodeChatWhole(
  res: IrResponse,
  ctx?: ClientRequestContext,
): Record<string, unknown> {
  const text = res.content.filter((p) => p.type === "text").map((p) => p.text).join("");
  const reasoning = res.content.filter((p) => p.type === "reasoning").map((p) => p.text).join("");
  const refusal = res.content.filter((p) => p.type === "refusal").map((p) => p.text).join("");
  const calls = res.content.flatMap((p) =>
    p.type === "tool_call"
      ? [{ id: p.id, type: "function", function: { name: p.name, arguments: p.arguments } }]
      : []
  );
  const message: Record<string, unknown> = { role: "assistant", content: text || null };
  if (reasoning) message.reasoning_content = reasoning;
  message.refusal = refusal || null;
  if (calls.length) message.tool_calls = calls;
  return {
    id: res.id.startsWith("chatcmpl") ? res.id : `chatcmpl-${res.id}`,
    object: "chat.completion",
    created: Math.floor(answerTime(ctx) / 1000),
    model: res.model,
    choices: [{ index: 0, message, finish_reason: irFinishToChat(res.finish), logprobs: null }],
    usage: irUsageToChat(res.usage),
  };
}
