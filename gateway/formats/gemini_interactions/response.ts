import { answerTime, type ClientRequestContext } from "../format.ts";
import { badResponse, upstreamStatusError } from "../upstream_error.ts";
import type { IrFinishReason, IrPart, IrResponse, IrUsage } from "../ir.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { appendAll } from "../../runtime/append_all.ts";
import { numberOf, stringOf } from "../gemini/fields.ts";
import { argsObject } from "../gemini/response.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import { interactionsEventContinuations } from "./continuations.ts";

type Json = Record<string, unknown>;

/**
 * How an interaction's status reads as a finish: `requires_action` is the model waiting for the
 * client's function results; `incomplete`, `budget_exceeded` and `requires_continuation` (the
 * per-request decode limit) stopped the output short.
 */
const FINISH_OF_STATUS: Record<string, IrFinishReason> = {
  completed: "stop",
  requires_action: "tool_calls",
  incomplete: "length",
  budget_exceeded: "length",
  requires_continuation: "length",
};

/** Statuses that are a failure of the interaction, not an answer (docs/interactions.md). */
export const FAILED_STATUSES = new Set(["failed", "cancelled"]);

export function interactionFinishToIr(
  status: string | undefined,
  opts: { calledTools: boolean },
): IrFinishReason {
  const finish = (status && FINISH_OF_STATUS[status]) || "stop";
  return finish === "stop" && opts.calledTools ? "tool_calls" : finish;
}

const STATUS_OF_FINISH: Record<IrFinishReason, string> = {
  stop: "completed",
  tool_calls: "requires_action",
  length: "incomplete",
  content_filter: "failed",
  error: "failed",
};

export function irFinishToStatus(finish: IrFinishReason | undefined): string {
  return finish === undefined ? "completed" : STATUS_OF_FINISH[finish];
}

/**
 * The Interactions API counts thoughts apart from output (`total_thought_tokens`); the
 * gateway's output tokens, like OpenAI's, include reasoning.
 */
export function interactionsUsageToIr(usage: unknown): IrUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const output = numberOf(usage.total_output_tokens);
  const thoughts = numberOf(usage.total_thought_tokens);
  return {
    inputTokens: numberOf(usage.total_input_tokens),
    outputTokens: output === undefined && thoughts === undefined
      ? undefined
      : (output ?? 0) + (thoughts ?? 0),
    cachedTokens: numberOf(usage.total_cached_tokens),
    reasoningTokens: thoughts,
  };
}

export function irUsageToInteractions(usage: IrUsage): Json {
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
  const reasoning = usage.reasoningTokens ?? 0;
  const out: Json = {
    total_input_tokens: input,
    total_output_tokens: Math.max(0, output - reasoning),
    total_tokens: input + output,
  };
  if (usage.cachedTokens !== undefined) out.total_cached_tokens = usage.cachedTokens;
  if (usage.reasoningTokens !== undefined) out.total_thought_tokens = usage.reasoningTokens;
  return out;
}

/** The text of a list of Content items (text items only). */
export function contentText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .map((c) => (isRecord(c) && c.type === "text" && typeof c.text === "string" ? c.text : ""))
    .join("");
}

/** A failure the interaction itself reports (`status: failed`, a model_output step's `error`). */
export function interactionFailure(interaction: Json): GatewayError {
  const errors = Array.isArray(interaction.errors) ? interaction.errors : [];
  const first = isRecord(errors[0]) ? errors[0] : {};
  const message = stringOf(first.message) ??
    `the upstream's interaction ended ${String(interaction.status ?? "failed")}`;
  const body = JSON.stringify({ error: { code: 500, message, status: "INTERNAL" } });
  return upstreamStatusError(500, { body, kind: "gemini-interactions" });
}

/** Reads a whole Interaction (`POST /v1beta/interactions` without `stream`). */
export function decodeInteractionsWhole(text: string): IrResponse {
  const body = parseJson(text);
  if (!isRecord(body)) throw badResponse("the upstream's answer is not a JSON object");
  if (isRecord(body.error)) throw badResponse("the upstream answered 200 with an error");
  const id = stringOf(body.id);
  const status = stringOf(body.status);
  if (!id || !status) throw badResponse("the upstream's answer is not an interaction");
  if (FAILED_STATUSES.has(status)) throw interactionFailure(body);
  const content: IrPart[] = [];
  const steps = Array.isArray(body.steps) ? body.steps : [];
  for (const step of steps) if (isRecord(step)) appendAll(content, stepParts(step));
  const calledTools = content.some((p) => p.type === "tool_call");
  const continuations = interactionsEventContinuations(body);
  return {
    id,
    model: stringOf(body.model) ?? "",
    content,
    finish: interactionFinishToIr(status, { calledTools }),
    usage: interactionsUsageToIr(body.usage) ?? {},
    ...(continuations.length ? { continuations } : {}),
  };
}

/** What one output step says, as IR parts; the input echoed back and server tools say nothing. */
function stepParts(step: Json): IrPart[] {
  switch (step.type) {
    case "model_output": {
      const text = contentText(step.content);
      return text ? [{ type: "text", text }] : [];
    }
    case "thought": {
      const text = contentText(step.summary);
      return text ? [{ type: "reasoning", text }] : [];
    }
    case "function_call":
      return [{
        type: "tool_call",
        id: stringOf(step.id) ?? "",
        name: stringOf(step.name) ?? "",
        arguments: JSON.stringify(isRecord(step.arguments) ? step.arguments : {}),
      }];
    default:
      return [];
  }
}

/** One IR part as an output step of an Interaction, or null where it has none. */
function irPartToStep(part: IrPart): Json | null {
  switch (part.type) {
    case "text":
    case "refusal":
      return { type: "model_output", content: [{ type: "text", text: part.text }] };
    case "reasoning":
      // Signatures are provider-bound; a foreign one would be refused if sent back.
      return { type: "thought", summary: [{ type: "text", text: part.text }] };
    case "image":
      return {
        type: "model_output",
        content: [{ type: "image", data: part.data, mime_type: part.mediaType }],
      };
    case "image_url":
      return { type: "model_output", content: [{ type: "image", uri: part.url }] };
    case "tool_call":
      return {
        type: "function_call",
        id: part.id,
        name: part.name,
        arguments: argsObject(part.arguments),
      };
    case "tool_result":
      return null;
  }
}

/** The answer's steps: consecutive outputs merged into one model_output step, as the API writes them. */
export function outputSteps(parts: IrPart[]): Json[] {
  const steps: Json[] = [];
  for (const part of parts) {
    const step = irPartToStep(part);
    if (!step) continue;
    const last = steps.at(-1);
    if (last?.type === "model_output" && step.type === "model_output") {
      appendAll(last.content as Json[], step.content as Json[]);
    } else steps.push(step);
  }
  return steps;
}

/** The time an interaction was made, as the API writes it (ISO 8601, whole seconds). */
export function isoSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** Writes a whole answer as an Interaction. */
export function encodeInteractionsWhole(res: IrResponse, ctx?: ClientRequestContext): Json {
  const now = isoSeconds(answerTime(ctx));
  return {
    // Some providers name no answer (Bedrock): the client still needs an interaction id.
    id: res.id || `pg_${crypto.randomUUID()}`,
    object: "interaction",
    model: res.model,
    status: irFinishToStatus(res.finish),
    created: now,
    updated: now,
    steps: outputSteps(res.content),
    usage: irUsageToInteractions(res.usage),
  };
}
