/**
 * Realistic Anthropic Messages responses from a small script, for fake
 * upstreams served over HTTP. Pure functions: the caller decides timing.
 */

/** Native stop reasons, or the IR's names for them. */
export type AnthropicFinish =
  | "end_turn"
  | "max_tokens"
  | "stop_sequence"
  | "tool_use"
  | "refusal"
  | "pause_turn"
  | "stop"
  | "length"
  | "tool_calls"
  | "content_filter";

export interface AnthropicScript {
  /** Text deltas, in order; all in one text block. */
  text: string[];
  /** Thinking deltas, sent in a thinking block before the text. */
  thinking?: string[];
  toolCall?: { id: string; name: string; argsPieces: string[] };
  /**
   * As Anthropic counts: `input` leaves out the cache reads and writes, reported beside it;
   * `cacheWrite1h` is the part of `cacheWrite` written for an hour (`cache_creation`).
   */
  usage: {
    input: number;
    output: number;
    cacheRead?: number;
    cacheWrite?: number;
    cacheWrite1h?: number;
  };
  /** Default: tool_use with a tool call, else end_turn. */
  finish?: AnthropicFinish;
  /** `ping` events sent right after message_start, before any content. */
  pingFirst?: number;
  id?: string;
  model?: string;
}

const irFinish: Record<string, string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  content_filter: "refusal",
};

function stopReason(script: AnthropicScript): string {
  const finish = script.finish ?? (script.toolCall ? "tool_use" : "end_turn");
  return irFinish[finish] ?? finish;
}

function sse(type: string, payload: Record<string, unknown> = {}): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`;
}

function message(script: AnthropicScript, content: unknown[]): Record<string, unknown> {
  return {
    id: script.id ?? "msg_01FakeUpstreamScript",
    type: "message",
    role: "assistant",
    model: script.model ?? "claude-sonnet-4-5",
    content,
    stop_reason: null,
    stop_sequence: null,
    usage: startUsage(script),
  };
}

/** The usage of message_start (and, with the final output, of a whole answer). */
function startUsage(script: AnthropicScript): Record<string, unknown> {
  const { input, cacheRead, cacheWrite, cacheWrite1h } = script.usage;
  const usage: Record<string, unknown> = {
    input_tokens: input,
    cache_creation_input_tokens: cacheWrite ?? 0,
    cache_read_input_tokens: cacheRead ?? 0,
    output_tokens: 1,
  };
  if (cacheWrite !== undefined) {
    usage.cache_creation = {
      ephemeral_5m_input_tokens: cacheWrite - (cacheWrite1h ?? 0),
      ephemeral_1h_input_tokens: cacheWrite1h ?? 0,
    };
  }
  return usage;
}

/** How many chunks open the stream as keep-alives (message_start and the pings). */
export function keepAliveCount(script: AnthropicScript): number {
  return 1 + (script.pingFirst ?? 0);
}

/**
 * The streamed body, one SSE event per chunk, in the order Anthropic sends
 * them: message_start, pings, then per block start/deltas/stop, then
 * message_delta with the stop reason and cumulative usage, and message_stop.
 */
export function streamChunks(script: AnthropicScript): (Uint8Array | string)[] {
  const chunks = [sse("message_start", { message: message(script, []) })];
  for (let i = 0; i < (script.pingFirst ?? 0); i++) chunks.push(sse("ping"));
  let index = 0;
  const block = (start: Record<string, unknown>, deltas: Record<string, unknown>[]) => {
    chunks.push(sse("content_block_start", { index, content_block: start }));
    for (const delta of deltas) chunks.push(sse("content_block_delta", { index, delta }));
    chunks.push(sse("content_block_stop", { index }));
    index++;
  };
  if (script.thinking?.length) {
    block({ type: "thinking", thinking: "", signature: "" }, [
      ...script.thinking.map((thinking) => ({ type: "thinking_delta", thinking })),
      {
        type: "signature_delta",
        signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
      },
    ]);
  }
  if (script.text.length) {
    block(
      { type: "text", text: "" },
      script.text.map((text) => ({ type: "text_delta", text })),
    );
  }
  const call = script.toolCall;
  if (call) {
    block(
      { type: "tool_use", id: call.id, name: call.name, input: {} },
      ["", ...call.argsPieces].map((partial_json) => ({ type: "input_json_delta", partial_json })),
    );
  }
  chunks.push(sse("message_delta", {
    delta: { stop_reason: stopReason(script), stop_sequence: null },
    usage: { output_tokens: script.usage.output },
  }));
  chunks.push(sse("message_stop"));
  return chunks;
}

/** The whole (non-streamed) JSON body for the same script. */
export function wholeBody(script: AnthropicScript): string {
  const content: Record<string, unknown>[] = [];
  if (script.thinking?.length) {
    content.push({
      type: "thinking",
      thinking: script.thinking.join(""),
      signature: "EqQBCgIYAhIM",
    });
  }
  if (script.text.length) content.push({ type: "text", text: script.text.join("") });
  const call = script.toolCall;
  if (call) {
    const args = call.argsPieces.join("");
    content.push({
      type: "tool_use",
      id: call.id,
      name: call.name,
      input: args ? JSON.parse(args) : {},
    });
  }
  const body = message(script, content);
  return JSON.stringify({
    ...body,
    stop_reason: stopReason(script),
    usage: { ...(body.usage as Record<string, unknown>), output_tokens: script.usage.output },
  });
}

const errorTypes: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error",
};

export function errorType(status: number): string {
  return errorTypes[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
}

/** Anthropic's error body for `status`. */
export function errorBody(status: number, message: string): string {
  return JSON.stringify({
    type: "error",
    error: { type: errorType(status), message },
    request_id: "req_011FakeUpstreamScript",
  });
}

/** An in-stream error event (Anthropic sends overloaded_error this way mid-stream). */
export function errorEvent(status: number, message: string): string {
  return sse("error", { error: { type: errorType(status), message } });
}
