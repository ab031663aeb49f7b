import { answerTime, type ClientStreamEncoder, type UpstreamFrame } from "../format.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import type { IrEvent } from "../ir.ts";
import { formatSse } from "../sse_stream.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { sseFrameDecoder, type SseRead, type SseReading } from "../sse_frames.ts";
import { type FrameDecoder, frameStream } from "../frame_decoder.ts";
import { upstreamStatusError } from "../upstream_error.ts";
import { openAiError } from "./errors.ts";
import { chatChunkIsContent } from "./pulse.ts";
import { chatFinishToIr, chatUsageToIr, irFinishToChat, irUsageToChat } from "./response.ts";

/** Frames of a Chat Completions SSE stream. */
export function decodeChatStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  return frameStream(chatFrameDecoder());
}

export function chatFrameDecoder(): FrameDecoder {
  return sseFrameDecoder(readChat, { quick: quickChat });
}

/** One reader for every stream, not a closure per stream. */
const readChat: SseRead = (event, json) => readChatEvent(event.data, json);

/**
 * A plain text delta, told from its text: a delta that is only its content (a
 * non-empty string, after the role at most), with no error, no usage and no
 * finish reason anywhere in the chunk. Such a chunk is content (docs/design.md
 * "Pulse") and nothing else the stream path acts on, so it is not parsed
 * unless its events are asked for (a translation, a resume): most
 * passed-through deltas never are.
 */
const TEXT_DELTA = /"delta":\{(?:"role":"assistant",)?"content":"/;

function quickChat(data: string, raw: Uint8Array): UpstreamFrame | null {
  if (data.charCodeAt(0) !== 123 || data.charCodeAt(data.length - 1) !== 125) return null;
  const match = TEXT_DELTA.exec(data);
  if (!match || data.includes('"error"')) return null;
  const chars = stringChars(data, match.index + match[0].length);
  if (!chars) return null;
  if (!onlyNull(data, '"finish_reason"') || !onlyNull(data, '"usage"')) return null;
  return new TextDeltaFrame(raw, { data, chars });
}

/**
 * The length of the JSON string starting at `from` (after its opening quote)
 * once decoded, if the object closes right after it; 0 otherwise.
 */
function stringChars(data: string, from: number): number {
  let chars = 0;
  for (let at = from; at < data.length; chars++) {
    const c = data.charCodeAt(at);
    if (c === 34) return data.charCodeAt(at + 1) === 125 ? chars : 0;
    at += c !== 92 ? 1 : data.charCodeAt(at + 1) === 117 ? 6 : 2;
  }
  return 0;
}

/** Whether every occurrence of `key` in `data` is followed by `:null`. */
function onlyNull(data: string, key: string): boolean {
  for (let at = data.indexOf(key); at >= 0; at = data.indexOf(key, at + key.length)) {
    if (!data.startsWith(":null", at + key.length)) return false;
  }
  return true;
}

class TextDeltaFrame implements UpstreamFrame {
  readonly content = true;
  readonly finishes = false;
  readonly chars: number;
  #data: string;
  #events: IrEvent[] | undefined;

  constructor(readonly raw: Uint8Array, opts: { data: string; chars: number }) {
    this.#data = opts.data;
    this.chars = opts.chars;
  }

  get events(): IrEvent[] {
    return this.#events ??= readChatEvent(this.#data, parseJson(this.#data)).events;
  }
}

function readChatEvent(data: string | undefined, chunk: unknown): SseReading {
  if (data === undefined) return { content: false, events: [] };
  if (data.trim() === "[DONE]") return { content: true, events: [], terminal: true };
  if (isRecord(chunk) && chunk.error !== undefined) {
    return {
      content: true,
      events: [],
      error: upstreamStatusError(500, { body: data, kind: "openai-chat" }),
    };
  }
  const usage = isRecord(chunk) ? chatUsageToIr(chunk.usage) : undefined;
  const events = chatChunkEvents(chunk);
  if (usage) events.push({ type: "usage", usage });
  return { content: chatChunkIsContent(chunk), events, usage };
}

function chatChunkEvents(chunk: unknown): IrEvent[] {
  const events: IrEvent[] = [];
  if (!isRecord(chunk) || !Array.isArray(chunk.choices)) return events;
  const choice = chunk.choices[0];
  if (!isRecord(choice)) return events;
  const delta = isRecord(choice.delta) ? choice.delta : {};
  const reasoning = delta.reasoning_content ?? delta.reasoning;
  if (typeof reasoning === "string" && reasoning) {
    events.push({ type: "reasoning", text: reasoning });
  }
  if (typeof delta.content === "string" && delta.content) {
    events.push({ type: "text", text: delta.content });
  }
  if (typeof delta.refusal === "string" && delta.refusal) {
    events.push({ type: "refusal", text: delta.refusal });
  }
  for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
    if (!isRecord(call)) continue;
    const index = typeof call.index === "number" ? call.index : 0;
    const fn = isRecord(call.function) ? call.function : {};
    if (typeof call.id === "string" || typeof fn.name === "string") {
      events.push({
        type: "tool_call_start",
        index,
        id: String(call.id ?? ""),
        name: String(fn.name ?? ""),
      });
    }
    if (typeof fn.arguments === "string" && fn.arguments) {
      events.push({ type: "tool_call_args", index, args: fn.arguments });
    }
  }
  if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
    events.push({ type: "finish", reason: chatFinishToIr(choice.finish_reason) });
  }
  return events;
}

const encoder = new TextEncoder();

/** Writes gateway events as Chat Completions chunks. */
export function chatStreamEncoder(
  meta: { id: string; model: string; now?: () => number },
): ClientStreamEncoder {
  return new ChatStreamEncoder(meta);
}

/**
 * One object with methods, not an object of closures over a scope: a held stream keeps its
 * encoder for as long as it is quiet (docs/performance_log.md "One object per held stream").
 */
class ChatStreamEncoder implements ClientStreamEncoder {
  readonly #id: string;
  readonly #model: string;
  readonly #created: number;
  #started = false;

  constructor(meta: { id: string; model: string; now?: () => number }) {
    this.#id = meta.id;
    this.#model = meta.model;
    this.#created = Math.floor(answerTime(meta) / 1000);
  }

  open(): null {
    return null;
  }

  encode(event: IrEvent): Uint8Array | null {
    switch (event.type) {
      case "start":
        return null;
      case "text":
        return this.#delta({ content: event.text });
      case "reasoning":
        // A signature alone (text "") is Anthropic's to carry: nothing to say here.
        return event.text ? this.#delta({ reasoning_content: event.text }) : null;
      case "refusal":
        return this.#delta({ refusal: event.text });
      case "tool_call_start":
        return this.#delta({
          tool_calls: [{
            index: event.index,
            id: event.id,
            type: "function",
            function: { name: event.name, arguments: "" },
          }],
        });
      case "tool_call_args":
        return this.#delta({
          tool_calls: [{ index: event.index, function: { arguments: event.args } }],
        });
      case "finish":
        return this.#delta({}, irFinishToChat(event.reason));
      case "usage":
        return this.#chunk([], { usage: irUsageToChat(event.usage) });
    }
  }

  close(): Uint8Array {
    return encoder.encode(formatSse({ data: "[DONE]" }));
  }

  error(err: GatewayError): Uint8Array {
    return encoder.encode(formatSse({ data: JSON.stringify(openAiError(err)) }));
  }

  #chunk(choices: unknown[], extra: Record<string, unknown> = {}): Uint8Array {
    return encoder.encode(formatSse({
      data: JSON.stringify({
        id: this.#id,
        object: "chat.completion.chunk",
        created: this.#created,
        model: this.#model,
        choices,
        ...extra,
      }),
    }));
  }

  #delta(d: Record<string, unknown>, finish: string | null = null): Uint8Array {
    const role = this.#started ? {} : { role: "assistant" };
    this.#started = true;
    return this.#chunk([{ index: 0, delta: { ...role, ...d }, finish_reason: finish }]);
  }
}
