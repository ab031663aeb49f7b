import { badResponse } from "../upstream_error.ts";
import {
  cacheWrites,
  type IrFinishReason,
  type IrPart,
  type IrResponse,
  type IrUsage,
} from "../ir.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";

const finishFromAnthropic: Record<string, IrFinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  pause_turn: "stop",
  max_tokens: "length",
  model_context_window_exceeded: "length",
  tool_use: "tool_calls",
  refusal: "content_filter",
};

export function anthropicStopToIr(reason: unknown): IrFinishReason {
  return typeof reason === "string" ? finishFromAnthropic[reason] ?? "stop" : "stop";
}

const finishToAnthropic: Record<IrFinishReason, string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  content_filter: "refusal",
  error: "end_turn",
};

/**
 * Agent loops run tools only on `tool_use`; some providers finish a turn that
 * calls tools with a plain stop, so a call in the answer decides it.
 */
export function irFinishToAnthropic(reason: IrFinishReason, opts: { toolCalls: boolean }): string {
  return reason === "stop" && opts.toolCalls ? "tool_use" : finishToAnthropic[reason];
}

const num = (v: unknown) => (typeof v === "number" ? v : undefined);

/**
 * Anthropic's `input_tokens` leaves out cache reads and writes, which it reports beside it
 * (`cache_read_input_tokens`, `cache_creation_input_tokens`, split by lifetime in
 * `cache_creation`); the IR's input is the whole prompt (as OpenAI counts it), with the reads
 * in `cachedTokens` and the writes in `cacheWriteTokens` (docs/observability.md "Cache tokens").
 */
export function anthropicUsageToIr(usage: unknown): IrUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const input = num(usage.input_tokens);
  const cacheRead = num(usage.cache_read_input_tokens);
  const cacheWrite = num(usage.cache_creation_input_tokens);
  const details = isRecord(usage.output_tokens_details) ? usage.output_tokens_details : {};
  const byTtl = isRecord(usage.cache_creation) ? usage.cache_creation : {};
  return {
    inputTokens: input === undefined ? undefined : input + (cacheRead ?? 0) + (cacheWrite ?? 0),
    outputTokens: num(usage.output_tokens),
    cachedTokens: cacheRead,
    reasoningTokens: num(details.thinking_tokens),
    ...cacheWrites(cacheWrite, { oneHour: num(byTtl.ephemeral_1h_input_tokens) }),
  };
}

/**
 * The IR's usage in Anthropic's words: `input_tokens` without the cache reads and writes, which
 * go in their own fields, the writes split by lifetime (all 5-minute unless told otherwise).
 */
export function irUsageToAnthropic(usage: IrUsage): Record<string, unknown> {
  const cached = usage.cachedTokens ?? 0;
  const written = usage.cacheWriteTokens ?? 0;
  const oneHour = Math.min(usage.cacheWrite1hTokens ?? 0, written);
  const out: Record<string, unknown> = {
    input_tokens: Math.max(0, (usage.inputTokens ?? 0) - cached - written),
    output_tokens: usage.outputTokens ?? 0,
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
  };
  if (usage.cacheWriteTokens !== undefined) {
    out.cache_creation = {
      ephemeral_5m_input_tokens: written - oneHour,
      ephemeral_1h_input_tokens: oneHour,
    };
  }
  if (usage.reasoningTokens !== undefined) {
    out.output_tokens_details = { thinking_tokens: usage.reasoningTokens };
  }
  return out;
}

/**
 * Reads a whole Messages answer. Blocks the IR has no part for (server tool
 * results, redacted thinking) are skipped: a translated request never asks
 * for them, and a pass-through answer goes to the client byte for byte.
 */
export function decodeAnthropicWhole(text: string): IrResponse {
  const body = parseJson(text);
  if (body === undefined) throw badResponse("the upstream's answer is not JSON");
  if (!isRecord(body) || !Array.isArray(body.content)) {
    throw badResponse("the upstream's answer has no content");
  }
  return {
    id: String(body.id ?? ""),
    model: String(body.model ?? ""),
    content: body.content.flatMap(blockToIr),
    finish: anthropicStopToIr(body.stop_reason),
    usage: anthropicUsageToIr(body.usage) ?? {},
  };
}

function blockToIr(block: unknown): IrPart[] {
  if (!isRecord(block)) return [];
  if (block.type === "text" && typeof block.text === "string") {
    return [{ type: "text", text: block.text }];
  }
  if (block.type === "thinking" && typeof block.thinking === "string") {
    const signature = typeof block.signature === "string" && block.signature
      ? { signature: block.signature }
      : {};
    return [{ type: "reasoning", text: block.thinking, ...signature }];
  }
  if (block.type === "tool_use") {
    return [{
      type: "tool_call",
      id: String(block.id ?? ""),
      name: String(block.name ?? ""),
      arguments: JSON.stringify(block.input ?? {}),
    }];
  }
  return [];
}

/** `msg_`-prefixed, as Anthropic's ids are and clients sometimes check. */
export function anthropicMessageId(id: string): string {
  return id.startsWith("msg_") ? id : `msg_${id}`;
}

/** Writes a whole answer as a Messages body. */
export function encodeAnthropicWhole(res: IrResponse): Record<string, unknown> {
  const content = res.content.flatMap(irPartToBlock);
  return {
    id: anthropicMessageId(res.id),
    type: "message",
    role: "assistant",
    model: res.model,
    content,
    stop_reason: irFinishToAnthropic(res.finish, {
      toolCalls: content.some((b) => b.type === "tool_use"),
    }),
    stop_sequence: null,
    usage: irUsageToAnthropic(res.usage),
  };
}

function irPartToBlock(p: IrPart): Record<string, unknown>[] {
  switch (p.type) {
    case "text":
    case "refusal":
      // Anthropic has no refusal block; its refusals are text with stop_reason "refusal".
      return [{ type: "text", text: p.text }];
    case "reasoning":
      return [{ type: "thinking", thinking: p.text, signature: p.signature ?? "" }];
    case "tool_call":
      return [{ type: "tool_use", id: p.id, name: p.name, input: toolInput(p.arguments) }];
    default:
      return [];
  }
}

/**
 * Tool input as Anthropic's object. A model can emit arguments that are not
 * JSON; the text is then passed on as it came rather than replaced by `{}`.
 */
export function toolInput(args: string): unknown {
  if (args.trim() === "") return {};
  const parsed = parseJson(args);
  return parsed === undefined ? args : parsed;
}
