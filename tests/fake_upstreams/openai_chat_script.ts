import type { Script, Step } from "./server.ts";
import { sseSteps } from "./server.ts";

/** Chat Completions bodies as OpenAI sends them, for the fake upstream. */

export interface ChatAnswer {
  text: string[];
  /** As OpenAI counts: `cached` and `cacheWrite` are parts of `input` (prompt_tokens). */
  usage?: { input: number; output: number; cached?: number; cacheWrite?: number };
  model?: string;
  toolCall?: { id: string; name: string; argsPieces: string[] };
  reasoning?: string[];
}

function chunk(delta: Record<string, unknown>, opts: { finish?: string; model?: string } = {}) {
  return `data: ${
    JSON.stringify({
      id: "chatcmpl-fake",
      object: "chat.completion.chunk",
      created: 1700000000,
      model: opts.model ?? "fake-model",
      choices: [{ index: 0, delta, finish_reason: opts.finish ?? null }],
    })
  }\n\n`;
}

function chatUsage(usage: NonNullable<ChatAnswer["usage"]>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    prompt_tokens: usage.input,
    completion_tokens: usage.output,
    total_tokens: usage.input + usage.output,
  };
  if (usage.cached !== undefined || usage.cacheWrite !== undefined) {
    out.prompt_tokens_details = {
      cached_tokens: usage.cached ?? 0,
      ...(usage.cacheWrite === undefined ? {} : { cache_write_tokens: usage.cacheWrite }),
    };
  }
  return out;
}

export function chatStreamBlocks(answer: ChatAnswer): string[] {
  const model = answer.model;
  const blocks = [chunk({ role: "assistant", content: "" }, { model })];
  for (const r of answer.reasoning ?? []) blocks.push(chunk({ reasoning_content: r }, { model }));
  for (const t of answer.text) blocks.push(chunk({ content: t }, { model }));
  if (answer.toolCall) {
    const { id, name, argsPieces } = answer.toolCall;
    blocks.push(chunk({
      tool_calls: [{ index: 0, id, type: "function", function: { name, arguments: "" } }],
    }, { model }));
    for (const piece of argsPieces) {
      blocks.push(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }, { model }));
    }
  }
  blocks.push(chunk({}, { finish: answer.toolCall ? "tool_calls" : "stop", model }));
  if (answer.usage) {
    blocks.push(`data: ${
      JSON.stringify({
        id: "chatcmpl-fake",
        object: "chat.completion.chunk",
        created: 1700000000,
        model: model ?? "fake-model",
        choices: [],
        usage: chatUsage(answer.usage),
      })
    }\n\n`);
  }
  blocks.push("data: [DONE]\n\n");
  return blocks;
}

export function chatStream(answer: ChatAnswer, opts: { gap?: number } = {}): Script {
  return {
    headers: { "content-type": "text/event-stream" },
    body: sseSteps(chatStreamBlocks(answer), opts),
  };
}

/**
 * The role chunk and the first content at once, then nothing until `release` settles, then the
 * rest: a stream that stays live exactly as long as the test needs, whatever the machine's load.
 * Only the idle window bounds the silence, so give the test a long one.
 */
export function chatStreamHeld(answer: ChatAnswer, release: Promise<unknown>): Script {
  const blocks = chatStreamBlocks(answer);
  return {
    headers: { "content-type": "text/event-stream" },
    body: [...sseSteps(blocks.slice(0, 2)), { until: release }, ...sseSteps(blocks.slice(2))],
  };
}

export function chatWholeBody(answer: ChatAnswer): string {
  const message: Record<string, unknown> = { role: "assistant", content: answer.text.join("") };
  if (answer.toolCall) {
    message.tool_calls = [{
      id: answer.toolCall.id,
      type: "function",
      function: { name: answer.toolCall.name, arguments: answer.toolCall.argsPieces.join("") },
    }];
  }
  const usage = answer.usage ?? { input: 0, output: 0 };
  return JSON.stringify({
    id: "chatcmpl-fake",
    object: "chat.completion",
    created: 1700000000,
    model: answer.model ?? "fake-model",
    choices: [{ index: 0, message, finish_reason: answer.toolCall ? "tool_calls" : "stop" }],
    usage: chatUsage(usage),
  });
}

export function chatWhole(answer: ChatAnswer): Script {
  return { body: [{ send: chatWholeBody(answer) }] };
}

export function chatError(status: number, message: string): Script {
  const type = status === 429
    ? "rate_limit_error"
    : status >= 500
    ? "server_error"
    : "invalid_request_error";
  return {
    status,
    body: [{ send: JSON.stringify({ error: { message, type, param: null, code: null } }) }],
  };
}

/**
 * An OpenAI error body with its code and param, laid out as the API sends it
 * (indented, trailing newline), so a byte-for-byte pass-through is visible.
 */
export function openAiErrorBody(
  error: { message: string; type: string; param?: string | null; code?: string | null },
): string {
  const { message, type, param = null, code = null } = error;
  return JSON.stringify({ error: { message, type, param, code } }, null, 4) + "\n";
}

/** Generic misbehaviours, valid for any SSE upstream. */
export const silentAfterHeaders: Script = {
  headers: { "content-type": "text/event-stream" },
  body: [{ hang: true }],
};
export const headersNever: Script = { headerDelay: "never" };
export function keepAlivesOnly(gap: number): Script {
  const steps: Step[] = [];
  for (let i = 0; i < 200; i++) steps.push({ send: ": ping\n\n" }, { wait: gap });
  return { headers: { "content-type": "text/event-stream" }, body: steps };
}
export function contentThenSilence(text: string): Script {
  const blocks = chatStreamBlocks({ text: [text] }).slice(0, 2);
  return {
    headers: { "content-type": "text/event-stream" },
    body: [...sseSteps(blocks), { hang: true }],
  };
}
export const whitespaceOnly: Script = { body: [{ send: "   \n\n  " }] };

/**
 * A first token no sooner than `ms` after the call, with keep-alives every 50 ms meanwhile (SSE
 * comments after a role-only chunk; whitespace in a whole body). Past `ms` the token is held until
 * the caller hangs up, so no late timer can let it win by accident: a test sees what the gateway
 * decided, not a race.
 */
export function slowFirstToken(
  call: { closed: Promise<unknown> },
  opts: { ms: number; text: string[]; whole?: boolean },
): Script {
  const keepAlive = opts.whole ? "\n" : ": keep-alive\n\n";
  const waits: Step[] = [];
  for (let t = 0; t < opts.ms; t += 50) waits.push({ send: keepAlive }, { wait: 50 });
  const late = { until: call.closed };
  if (opts.whole) return { body: [...waits, late, { send: chatWholeBody({ text: opts.text }) }] };
  const [role, ...rest] = chatStreamBlocks({ text: opts.text });
  return {
    headers: { "content-type": "text/event-stream" },
    body: [{ send: role! }, ...waits, late, ...rest.map((send) => ({ send }))],
  };
}
