/**
 * Realistic OpenAI Responses API bodies from a small script, for fake
 * upstreams: the same event order, ids and fields the real API sends.
 */

export interface ResponsesScript {
  /** Text deltas of the answer's message. */
  text: string[];
  /** Reasoning summary deltas, sent before the message. */
  reasoning?: string[];
  toolCall?: { id: string; name: string; argsPieces: string[] };
  /** As OpenAI counts: `cached` and `cacheWrite` are parts of `input`. */
  usage: {
    input: number;
    output: number;
    cached?: number;
    cacheWrite?: number;
    reasoning?: number;
  };
  finish?: "stop" | "length" | "tool_calls" | "content_filter";
  model?: string;
  id?: string;
}

type Json = Record<string, unknown>;

const MODEL = "gpt-5-2025-08-07";

function idOf(script: ResponsesScript): string {
  return script.id ?? "resp_68af00000000000000000000000000000000000000000000";
}

function baseResponse(script: ResponsesScript, fields: Json): Json {
  return {
    id: idOf(script),
    object: "response",
    created_at: 1756300000,
    status: "in_progress",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: script.model ?? MODEL,
    output: [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: "medium", summary: null },
    store: false,
    temperature: 1,
    text: { format: { type: "text" }, verbosity: "medium" },
    tool_choice: "auto",
    tools: [],
    top_p: 1,
    truncation: "disabled",
    usage: null,
    user: null,
    metadata: {},
    ...fields,
  };
}

function usageJson(script: ResponsesScript): Json {
  const u = script.usage;
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cached ?? 0, cache_write_tokens: u.cacheWrite ?? 0 },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning ?? 0 },
    total_tokens: u.input + u.output,
  };
}

/** Final output items, in the order the stream announces them. */
function outputItems(script: ResponsesScript): Json[] {
  const items: Json[] = [];
  if (script.reasoning?.length) {
    items.push({
      id: "rs_0001",
      type: "reasoning",
      summary: [{ type: "summary_text", text: script.reasoning.join("") }],
    });
  }
  if (script.text.length) {
    items.push({
      id: "msg_0001",
      type: "message",
      status: "completed",
      content: [{ type: "output_text", annotations: [], logprobs: [], text: script.text.join("") }],
      role: "assistant",
    });
  }
  if (script.toolCall) {
    items.push({
      id: "fc_0001",
      type: "function_call",
      status: "completed",
      arguments: script.toolCall.argsPieces.join(""),
      call_id: script.toolCall.id,
      name: script.toolCall.name,
    });
  }
  return items;
}

function terminal(script: ResponsesScript): { event: string; fields: Json } {
  if (script.finish === "length" || script.finish === "content_filter") {
    const reason = script.finish === "length" ? "max_output_tokens" : "content_filter";
    return {
      event: "response.incomplete",
      fields: { status: "incomplete", incomplete_details: { reason } },
    };
  }
  return { event: "response.completed", fields: { status: "completed" } };
}

/** The whole (non-streamed) JSON body. */
export function responsesWholeBody(script: ResponsesScript): string {
  return JSON.stringify(baseResponse(script, {
    ...terminal(script).fields,
    output: outputItems(script),
    usage: usageJson(script),
  }));
}

/** Builds events with increasing sequence numbers, as the API numbers them. */
class EventLog {
  chunks: string[] = [];
  #seq = 0;

  add(type: string, fields: Json): void {
    const data = JSON.stringify({ type, sequence_number: this.#seq++, ...fields });
    this.chunks.push(`event: ${type}\ndata: ${data}\n\n`);
  }
}

/**
 * The streamed body, one SSE block per chunk. `pingFirst` adds that many
 * `response.in_progress` events after `response.created`: the Responses
 * API's own keep-alives (docs/design.md "Pulse"), placed where the official SDK accepts them.
 */
export function responsesStreamChunks(
  script: ResponsesScript,
  opts: { pingFirst?: number } = {},
): (Uint8Array | string)[] {
  const log = new EventLog();
  log.add("response.created", { response: baseResponse(script, {}) });
  for (let i = 0; i < (opts.pingFirst ?? 1); i++) {
    log.add("response.in_progress", { response: baseResponse(script, {}) });
  }
  const items = outputItems(script);
  items.forEach((item, index) => streamItem(log, { script, item, index }));
  const end = terminal(script);
  log.add(end.event, {
    response: baseResponse(script, { ...end.fields, output: items, usage: usageJson(script) }),
  });
  return log.chunks;
}

function streamItem(log: EventLog, at: { script: ResponsesScript; item: Json; index: number }) {
  const { script, item, index } = at;
  const ref = { item_id: item.id, output_index: index };
  if (item.type === "reasoning") {
    log.add("response.output_item.added", { output_index: index, item: { ...item, summary: [] } });
    const part = { type: "summary_text", text: "" };
    log.add("response.reasoning_summary_part.added", { ...ref, summary_index: 0, part });
    for (const delta of script.reasoning ?? []) {
      log.add("response.reasoning_summary_text.delta", { ...ref, summary_index: 0, delta });
    }
    const text = (script.reasoning ?? []).join("");
    log.add("response.reasoning_summary_text.done", { ...ref, summary_index: 0, text });
    log.add("response.reasoning_summary_part.done", {
      ...ref,
      summary_index: 0,
      part: { type: "summary_text", text },
    });
  } else if (item.type === "message") {
    const added = { ...item, status: "in_progress", content: [] };
    log.add("response.output_item.added", { output_index: index, item: added });
    const empty = { type: "output_text", annotations: [], logprobs: [], text: "" };
    log.add("response.content_part.added", { ...ref, content_index: 0, part: empty });
    for (const delta of script.text) {
      log.add("response.output_text.delta", { ...ref, content_index: 0, delta, logprobs: [] });
    }
    const text = script.text.join("");
    log.add("response.output_text.done", { ...ref, content_index: 0, text, logprobs: [] });
    log.add("response.content_part.done", { ...ref, content_index: 0, part: { ...empty, text } });
  } else {
    const added = { ...item, status: "in_progress", arguments: "" };
    log.add("response.output_item.added", { output_index: index, item: added });
    for (const delta of script.toolCall?.argsPieces ?? []) {
      log.add("response.function_call_arguments.delta", { ...ref, delta });
    }
    log.add("response.function_call_arguments.done", { ...ref, arguments: item.arguments });
  }
  log.add("response.output_item.done", { output_index: index, item });
}

const errorTypes: Record<number, { type: string; code: string | null }> = {
  400: { type: "invalid_request_error", code: null },
  401: { type: "invalid_request_error", code: "invalid_api_key" },
  403: { type: "invalid_request_error", code: "unsupported_country_region_territory" },
  404: { type: "invalid_request_error", code: "model_not_found" },
  429: { type: "requests", code: "rate_limit_exceeded" },
  500: { type: "server_error", code: null },
  503: { type: "server_error", code: null },
};

/** An error body as OpenAI sends it for `status`. */
export function errorBody(status: number, message: string): string {
  const known = errorTypes[status] ?? { type: "server_error", code: null };
  return JSON.stringify({ error: { message, type: known.type, param: null, code: known.code } });
}

/** A stream that fails after it started: OpenAI's in-stream `response.failed`. */
export function responsesFailedChunks(script: ResponsesScript, message: string): string[] {
  const log = new EventLog();
  log.add("response.created", { response: baseResponse(script, {}) });
  log.add("response.failed", {
    response: baseResponse(script, {
      status: "failed",
      error: { code: "server_error", message },
    }),
  });
  return log.chunks;
}
