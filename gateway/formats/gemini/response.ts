import { badResponse } from "../upstream_error.ts";
import type { IrFinishReason, IrPart, IrResponse, IrUsage } from "../ir.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { field, numberOf, stringOf } from "./fields.ts";
import { finishReasonOf } from "./pulse.ts";

const finishFromGemini: Record<string, IrFinishReason> = {
  STOP: "stop",
  MAX_TOKENS: "length",
  SAFETY: "content_filter",
  RECITATION: "content_filter",
  BLOCKLIST: "content_filter",
  PROHIBITED_CONTENT: "content_filter",
  SPII: "content_filter",
  IMAGE_SAFETY: "content_filter",
  IMAGE_PROHIBITED_CONTENT: "content_filter",
  IMAGE_RECITATION: "content_filter",
  LANGUAGE: "error",
  OTHER: "error",
  MALFORMED_FUNCTION_CALL: "error",
  UNEXPECTED_TOOL_CALL: "error",
  TOO_MANY_TOOL_CALLS: "error",
  MISSING_THOUGHT_SIGNATURE: "error",
};

/** Gemini ends a function-calling turn with STOP; the caller knows whether a call was made. */
export function geminiFinishToIr(reason: string, opts: { toolCalled: boolean }): IrFinishReason {
  const finish = finishFromGemini[reason] ?? "stop";
  return finish === "stop" && opts.toolCalled ? "tool_calls" : finish;
}

const finishToGemini: Record<IrFinishReason, string> = {
  stop: "STOP",
  length: "MAX_TOKENS",
  tool_calls: "STOP",
  content_filter: "SAFETY",
  error: "OTHER",
};

export function irFinishToGemini(reason: IrFinishReason): string {
  return finishToGemini[reason];
}

/**
 * Gemini counts thoughts apart from candidates; the gateway's output tokens,
 * like OpenAI's, include reasoning.
 */
export function geminiUsageToIr(usage: unknown): IrUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const candidates = numberOf(field(usage, "candidatesTokenCount"));
  const thoughts = numberOf(field(usage, "thoughtsTokenCount"));
  return {
    inputTokens: numberOf(field(usage, "promptTokenCount")),
    outputTokens: candidates === undefined && thoughts === undefined
      ? undefined
      : (candidates ?? 0) + (thoughts ?? 0),
    cachedTokens: numberOf(field(usage, "cachedContentTokenCount")),
    reasoningTokens: thoughts,
  };
}

export function irUsageToGemini(usage: IrUsage): Record<string, unknown> {
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
  const reasoning = usage.reasoningTokens ?? 0;
  const out: Record<string, unknown> = {
    promptTokenCount: input,
    candidatesTokenCount: Math.max(0, output - reasoning),
    totalTokenCount: input + output,
  };
  if (usage.cachedTokens !== undefined) out.cachedContentTokenCount = usage.cachedTokens;
  if (usage.reasoningTokens !== undefined) out.thoughtsTokenCount = usage.reasoningTokens;
  return out;
}

/**
 * Gemini's functionCall often has no id: one is made from the response id and
 * the call's position, so it stays the same wherever the answer is read and
 * differs from the ids of earlier turns.
 */
export function geminiToolCallId(
  call: Record<string, unknown>,
  opts: { responseId?: string; index: number },
): string {
  const own = stringOf(call.id);
  if (own) return own;
  const scope = (opts.responseId ?? "").replace(/[^A-Za-z0-9_-]/g, "");
  return scope ? `call_${scope}_${opts.index}` : `call_${opts.index}`;
}

/** The parts of a response's first candidate (Gemini clients ask for one). */
export function firstCandidate(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const candidates = body.candidates;
  return Array.isArray(candidates) && isRecord(candidates[0]) ? candidates[0] : undefined;
}

export function candidateParts(candidate: Record<string, unknown> | undefined): unknown[] {
  const content = candidate?.content;
  return isRecord(content) && Array.isArray(content.parts) ? content.parts : [];
}

/** A prompt Gemini refused outright answers with promptFeedback and no candidates. */
export function promptBlocked(body: Record<string, unknown>): boolean {
  const feedback = field(body, "promptFeedback");
  return isRecord(feedback) && typeof field(feedback, "blockReason") === "string";
}

/** Reads a whole generateContent answer. */
export function decodeGeminiWhole(text: string): IrResponse {
  const body = parseJson(text);
  if (!isRecord(body)) throw badResponse("the upstream's answer is not a JSON object");
  const candidate = firstCandidate(body);
  if (!candidate && !promptBlocked(body)) {
    throw badResponse("the upstream's answer has no candidates");
  }
  const responseId = stringOf(field(body, "responseId"));
  const content: IrPart[] = [];
  let calls = 0;
  for (const part of candidateParts(candidate)) {
    if (!isRecord(part)) continue;
    const call = field(part, "functionCall");
    if (isRecord(call)) {
      content.push({
        type: "tool_call",
        id: geminiToolCallId(call, { responseId, index: calls++ }),
        name: stringOf(call.name) ?? "",
        arguments: JSON.stringify(isRecord(call.args) ? call.args : {}),
      });
      continue;
    }
    const read = readAnswerPart(part);
    if (read) content.push(read);
  }
  const reason = candidate ? finishReasonOf(candidate) : undefined;
  return {
    id: responseId ?? "",
    model: stringOf(field(body, "modelVersion")) ?? "",
    content,
    finish: promptBlocked(body) && !candidate
      ? "content_filter"
      : geminiFinishToIr(reason ?? "STOP", { toolCalled: calls > 0 }),
    usage: geminiUsageToIr(field(body, "usageMetadata")) ?? {},
  };
}

/** Text, thought and inline image parts of an answer; function calls are read by the caller. */
function readAnswerPart(part: Record<string, unknown>): IrPart | undefined {
  if (typeof part.text === "string") {
    if (part.text === "") return undefined;
    return part.thought === true
      ? { type: "reasoning", text: part.text }
      : { type: "text", text: part.text };
  }
  const inline = field(part, "inlineData");
  if (isRecord(inline)) {
    const mediaType = stringOf(field(inline, "mimeType")) ?? "";
    const data = stringOf(inline.data);
    if (mediaType.startsWith("image/") && data) return { type: "image", mediaType, data };
  }
  return undefined;
}

/** One IR part as a Gemini answer part, or null where Gemini has no such part. */
export function irPartToGemini(part: IrPart): Record<string, unknown> | null {
  switch (part.type) {
    case "text":
    case "refusal":
      return { text: part.text };
    case "reasoning":
      // Signatures are provider-bound; a foreign one would be rejected if echoed back.
      return { text: part.text, thought: true };
    case "image":
      return { inlineData: { mimeType: part.mediaType, data: part.data } };
    case "image_url":
      return { fileData: { fileUri: part.url } };
    case "tool_call":
      return {
        functionCall: { id: part.id, name: part.name, args: argsObject(part.arguments) },
      };
    case "tool_result":
      return null;
  }
}

/** Tool arguments as the object Gemini wants; text that is not an object is kept, not lost. */
export function argsObject(args: string): Record<string, unknown> {
  if (args.trim() === "") return {};
  const value = parseJson(args);
  return isRecord(value) ? value : { arguments: args };
}

/** Writes a whole answer as a GenerateContentResponse. */
export function encodeGeminiWhole(res: IrResponse): Record<string, unknown> {
  const parts = res.content.map(irPartToGemini).filter((p) => p !== null);
  return {
    candidates: [{
      // The SDK only records a chat turn whose content has parts.
      content: { role: "model", parts: parts.length ? parts : [{ text: "" }] },
      finishReason: irFinishToGemini(res.finish),
      index: 0,
    }],
    usageMetadata: irUsageToGemini(res.usage),
    modelVersion: res.model,
    responseId: res.id,
  };
}
