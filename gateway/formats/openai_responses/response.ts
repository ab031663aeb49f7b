import { answerTime, type ClientRequestContext } from "../format.ts";
import {
  cacheWrites,
  type IrClientTools,
  type IrFinishReason,
  type IrPart,
  type IrResponse,
  type IrUsage,
} from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import { customInput, searchArguments } from "./client_tools.ts";
import { badResponse } from "../upstream_error.ts";
import { responsesStreamFailure } from "./errors.ts";
import { responseContinuations } from "./continuations.ts";

type Json = Record<string, unknown>;

export function responsesUsageToIr(usage: unknown): IrUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const num = (v: unknown) => (typeof v === "number" ? v : undefined);
  const input = isRecord(usage.input_tokens_details) ? usage.input_tokens_details : {};
  const output = isRecord(usage.output_tokens_details) ? usage.output_tokens_details : {};
  return {
    inputTokens: num(usage.input_tokens),
    outputTokens: num(usage.output_tokens),
    cachedTokens: num(input.cached_tokens),
    reasoningTokens: num(output.reasoning_tokens),
    // Part of input_tokens, like the cached ones (docs/observability.md "Cache tokens").
    ...cacheWrites(num(input.cache_write_tokens)),
  };
}

/** The SDK types every field as required, so unknown details are written as 0. */
export function irUsageToResponses(usage: IrUsage): Json | null {
  if (Object.values(usage).every((v) => v === undefined)) return null;
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: {
      cached_tokens: usage.cachedTokens ?? 0,
      cache_write_tokens: usage.cacheWriteTokens ?? 0,
    },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: input + output,
  };
}

/**
 * A response's end state as the other formats say it: an incomplete answer
 * ran out of tokens or was filtered, a completed one with calls wants tools.
 */
export function responsesFinishToIr(
  response: Json,
  opts: { calledTools: boolean },
): IrFinishReason {
  if (response.status === "incomplete") {
    const details = isRecord(response.incomplete_details) ? response.incomplete_details : {};
    return details.reason === "content_filter" ? "content_filter" : "length";
  }
  if (response.status === "failed") return "error";
  return opts.calledTools ? "tool_calls" : "stop";
}

export type TerminalEvent = "response.completed" | "response.incomplete" | "response.failed";

/** How a finish reason ends a response: its status, details and lifecycle event. */
export function irFinishToResponses(reason: IrFinishReason | undefined): {
  event: TerminalEvent;
  fields: Json;
} {
  if (reason === "length" || reason === "content_filter") {
    const why = reason === "length" ? "max_output_tokens" : "content_filter";
    return {
      event: "response.incomplete",
      fields: { status: "incomplete", incomplete_details: { reason: why } },
    };
  }
  if (reason === "error") {
    return {
      event: "response.failed",
      fields: {
        status: "failed",
        error: { code: "server_error", message: "the upstream ended its answer with an error" },
      },
    };
  }
  return { event: "response.completed", fields: { status: "completed" } };
}

/** Response ids carry OpenAI's prefix so clients that check it are not surprised. */
export function responseId(id: string): string {
  return id.startsWith("resp_") ? id : `resp_${id}`;
}

/** Item ids derived from the response id: unique within it, stable for a replay. */
export function itemId(prefix: "msg" | "fc" | "rs", opts: { responseId: string; index: number }) {
  return `${prefix}_${opts.responseId.replace(/^resp_/, "")}_${opts.index}`;
}

/**
 * A whole Response object. Request echoes (tools, instructions, sampling) are
 * not known where answers are written, so they carry the API's neutral values.
 */
export function responseObject(
  base: { id: string; model: string; createdAt: number },
  fields: Json,
): Json {
  return {
    id: base.id,
    object: "response",
    created_at: base.createdAt,
    status: "in_progress",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: base.model,
    output: [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: false,
    temperature: null,
    text: { format: { type: "text" } },
    tool_choice: "auto",
    tools: [],
    top_p: null,
    truncation: "disabled",
    usage: null,
    user: null,
    metadata: {},
    ...fields,
  };
}

/** Reads a whole Responses API answer. */
export function decodeResponsesWhole(text: string): IrResponse {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw badResponse("the upstream's answer is not JSON");
  }
  if (!isRecord(body) || !Array.isArray(body.output)) {
    throw badResponse("the upstream's answer has no output");
  }
  if (body.status === "failed") throw responsesStreamFailure(body.error);
  const content = body.output.flatMap(outputItemParts);
  const continuations = responseContinuations(body);
  return {
    id: String(body.id ?? ""),
    model: String(body.model ?? ""),
    content,
    finish: responsesFinishToIr(body, {
      calledTools: content.some((p) => p.type === "tool_call"),
    }),
    usage: responsesUsageToIr(body.usage) ?? {},
    ...(continuations.length ? { continuations } : {}),
  };
}

/** The parts one output item contributes to an answer; hosted-tool items have none. */
export function outputItemParts(item: unknown): IrPart[] {
  if (!isRecord(item)) return [];
  if (item.type === "function_call") {
    return [{
      type: "tool_call",
      id: String(item.call_id ?? item.id ?? ""),
      name: String(item.name ?? ""),
      arguments: String(item.arguments ?? ""),
    }];
  }
  if (item.type === "reasoning") {
    const text = reasoningText(item);
    return text ? [{ type: "reasoning", text }] : [];
  }
  if (item.type !== "message" || !Array.isArray(item.content)) return [];
  return item.content.flatMap((part): IrPart[] => {
    if (!isRecord(part)) return [];
    if (part.type === "output_text" && typeof part.text === "string") {
      return [{ type: "text", text: part.text }];
    }
    if (part.type === "refusal" && typeof part.refusal === "string") {
      return [{ type: "refusal", text: part.refusal }];
    }
    return [];
  });
}

function reasoningText(item: Json): string {
  const pieces = [
    ...(Array.isArray(item.summary) ? item.summary : []),
    ...(Array.isArray(item.content) ? item.content : []),
  ];
  return pieces.map((p) => (isRecord(p) && typeof p.text === "string" ? p.text : ""))
    .filter((t) => t !== "").join("\n\n");
}

/** Writes a whole answer as a Responses API body; `clientTools` names reshaped tools' calls. */
export function encodeResponsesWhole(res: IrResponse, ctx?: ClientRequestContext): Json {
  const clientTools = ctx?.clientTools;
  const id = responseId(res.id);
  const terminal = irFinishToResponses(res.finish);
  const itemStatus = terminal.event === "response.completed" ? "completed" : "incomplete";
  return responseObject({ id, model: res.model, createdAt: Math.floor(answerTime(ctx) / 1000) }, {
    ...terminal.fields,
    output: outputItems(res.content, { responseId: id, status: itemStatus, clientTools }),
    usage: irUsageToResponses(res.usage),
  });
}

/** Groups an answer's parts into output items: runs of text and refusals share one message. */
function outputItems(
  parts: IrPart[],
  opts: { responseId: string; status: string; clientTools?: IrClientTools },
): Json[] {
  const items: Json[] = [];
  const ids = (prefix: "msg" | "fc" | "rs") =>
    itemId(prefix, { responseId: opts.responseId, index: items.length });
  let message: Json[] | null = null;
  let reasoning: Json[] | null = null;
  for (const part of parts) {
    if (part.type === "text" || part.type === "refusal") {
      reasoning = null;
      if (!message) {
        message = [];
        items.push(messageItem(ids("msg"), { content: message, status: opts.status }));
      }
      message.push(contentPart(part));
    } else if (part.type === "reasoning") {
      message = null;
      if (!reasoning) {
        reasoning = [];
        items.push({ type: "reasoning", id: ids("rs"), summary: reasoning });
      }
      reasoning.push({ type: "summary_text", text: part.text });
    } else if (part.type === "tool_call") {
      message = reasoning = null;
      items.push(toolCallItem(ids("fc"), { ...part, status: opts.status }, opts.clientTools));
    }
  }
  return items;
}

export function messageItem(id: string, opts: { content: Json[]; status: string }): Json {
  return { type: "message", id, status: opts.status, role: "assistant", content: opts.content };
}

export function functionCallItem(
  id: string,
  call: { id: string; name: string; arguments: string; status: string },
): Json {
  return {
    type: "function_call",
    id,
    call_id: call.id,
    name: call.name,
    arguments: call.arguments,
    status: call.status,
  };
}

/**
 * A call as the client declared its tool: a function of a namespace carries
 * the namespace and its own name, a free-form tool's call is a
 * `custom_tool_call` with the raw input, a tool search a `tool_search_call`.
 */
export function toolCallItem(
  id: string,
  call: { id: string; name: string; arguments: string; status: string },
  clientTools: IrClientTools | undefined,
): Json {
  const client = clientTools?.[call.name];
  if (!client) return functionCallItem(id, call);
  const namespace = client.namespace ? { namespace: client.namespace } : {};
  if (client.shape === "custom") {
    return {
      type: "custom_tool_call",
      id,
      call_id: call.id,
      name: client.name,
      ...namespace,
      input: customInput(call.arguments),
      status: call.status,
    };
  }
  if (client.shape === "tool_search") {
    return {
      type: "tool_search_call",
      id,
      call_id: call.id,
      execution: "client",
      arguments: searchArguments(call.arguments),
      status: call.status,
    };
  }
  return { ...functionCallItem(id, { ...call, name: client.name }), ...namespace };
}

function contentPart(part: { type: "text" | "refusal"; text: string }): Json {
  return part.type === "text"
    ? { type: "output_text", text: part.text, annotations: [], logprobs: [] }
    : { type: "refusal", refusal: part.text };
}
