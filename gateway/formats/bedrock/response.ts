import { badResponse } from "../upstream_error.ts";
import {
  cacheWrites,
  type IrFinishReason,
  type IrPart,
  type IrResponse,
  type IrUsage,
} from "../ir.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";

const finishFromBedrock: Record<string, IrFinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  model_context_window_exceeded: "length",
  content_filtered: "content_filter",
  guardrail_intervened: "content_filter",
};

export function bedrockStopToIr(reason: unknown): IrFinishReason {
  return typeof reason === "string" ? finishFromBedrock[reason] ?? "stop" : "stop";
}

/**
 * Bedrock counts cache reads and writes apart from `inputTokens` (`cacheReadInputTokens`,
 * `cacheWriteInputTokens`, the writes split by lifetime in `cacheDetails`); the gateway's input
 * count is everything read, with the cache reads and writes as parts of it (as OpenAI reports).
 */
export function bedrockUsageToIr(usage: unknown): IrUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const num = (v: unknown) => (typeof v === "number" ? v : undefined);
  const input = num(usage.inputTokens);
  const cacheRead = num(usage.cacheReadInputTokens);
  const cacheWrite = num(usage.cacheWriteInputTokens);
  return {
    inputTokens: input === undefined ? undefined : input + (cacheRead ?? 0) + (cacheWrite ?? 0),
    outputTokens: num(usage.outputTokens),
    cachedTokens: cacheRead,
    ...cacheWrites(cacheWrite, { oneHour: oneHourWrites(usage.cacheDetails) }),
  };
}

/** `cacheDetails: [{ttl: "1h", inputTokens}, {ttl: "5m", ...}]`: the tokens written for an hour. */
function oneHourWrites(details: unknown): number | undefined {
  if (!Array.isArray(details)) return undefined;
  let tokens: number | undefined;
  for (const detail of details) {
    if (isRecord(detail) && detail.ttl === "1h" && typeof detail.inputTokens === "number") {
      tokens = (tokens ?? 0) + detail.inputTokens;
    }
  }
  return tokens;
}

/** Reads a whole Converse answer. */
export function decodeBedrockWhole(text: string): IrResponse {
  const body = parseJson(text);
  if (!isRecord(body)) throw badResponse("the upstream's answer is not a JSON object");
  const output = isRecord(body.output) ? body.output : {};
  const message = isRecord(output.message) ? output.message : undefined;
  if (!message || !Array.isArray(message.content)) {
    throw badResponse("the upstream's answer has no output message");
  }
  return {
    // Converse answers carry no id of their own (only the x-amzn-requestid header).
    id: `bedrock-${crypto.randomUUID()}`,
    model: "",
    content: message.content.flatMap(irParts),
    finish: bedrockStopToIr(body.stopReason),
    usage: bedrockUsageToIr(body.usage) ?? {},
  };
}

function irParts(block: unknown): IrPart[] {
  if (!isRecord(block)) return [];
  if (typeof block.text === "string") return block.text ? [{ type: "text", text: block.text }] : [];
  if (isRecord(block.toolUse)) {
    const use = block.toolUse;
    return [{
      type: "tool_call",
      id: String(use.toolUseId ?? ""),
      name: String(use.name ?? ""),
      arguments: JSON.stringify(use.input ?? {}),
    }];
  }
  if (isRecord(block.reasoningContent) && isRecord(block.reasoningContent.reasoningText)) {
    const reasoning = block.reasoningContent.reasoningText;
    return [{
      type: "reasoning",
      text: String(reasoning.text ?? ""),
      ...(typeof reasoning.signature === "string" ? { signature: reasoning.signature } : {}),
    }];
  }
  // Redacted reasoning, citations and the like have no place in the gateway's answer.
  return [];
}
