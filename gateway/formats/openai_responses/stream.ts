import { answerTime, type ClientStreamEncoder, type UpstreamFrame } from "../format.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import {
  type IrClientTool,
  type IrClientTools,
  type IrEvent,
  type IrFinishReason,
  type IrUsage,
  mergeUsage,
} from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import { sseFrameDecoder, type SseReading } from "../sse_frames.ts";
import { type FrameDecoder, frameStream } from "../frame_decoder.ts";
import { formatSse, type SseEvent } from "../sse_stream.ts";
import { openAiError } from "../openai_chat/errors.ts";
import { failedResponseError, responsesStreamFailure } from "./errors.ts";
import { responsesEventIsContent } from "./pulse.ts";
import { customInput } from "./client_tools.ts";
import { responsesEventContinuations } from "./continuations.ts";
import {
  irFinishToResponses,
  irUsageToResponses,
  itemId,
  messageItem,
  outputItemParts,
  responseId,
  responseObject,
  responsesFinishToIr,
  responsesUsageToIr,
  toolCallItem,
} from "./response.ts";

type Json = Record<string, unknown>;

/**
 * What one upstream stream has said so far. Output indexes count every item
 * (reasoning, messages, calls) while the other formats number tool calls on
 * their own, and an item's `done` may carry what no delta did.
 */
class ReadState {
  toolIndex = new Map<number, number>();
  argsSeen = new Set<number>();
  deltaSeen = new Set<number>();

  toolIndexOf(outputIndex: number): number {
    let index = this.toolIndex.get(outputIndex);
    if (index === undefined) {
      index = this.toolIndex.size;
      this.toolIndex.set(outputIndex, index);
    }
    return index;
  }
}

/** Frames of a Responses API SSE stream. */
export function decodeResponsesStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  return frameStream(responsesFrameDecoder());
}

export function responsesFrameDecoder(): FrameDecoder {
  const state = new ReadState();
  return sseFrameDecoder((event, json) => {
    const reading = readResponsesEvent(event, { payload: json, state });
    const continuations = isRecord(json) ? responsesEventContinuations(json) : [];
    return continuations.length ? { ...reading, continuations } : reading;
  });
}

function readResponsesEvent(
  event: SseEvent,
  { payload, state }: { payload: unknown; state: ReadState },
): SseReading {
  if (event.data === undefined) return { content: false, events: [] };
  const type = isRecord(payload) && typeof payload.type === "string" ? payload.type : event.event;
  const content = responsesEventIsContent(type);
  if (!isRecord(payload)) return { content, events: [] };
  if (type === "error") {
    return { content: true, events: [], error: responsesStreamFailure(payload.error ?? payload) };
  }
  if (type === "response.failed") {
    const response = isRecord(payload.response) ? payload.response : {};
    return { content: true, events: [], error: responsesStreamFailure(response.error) };
  }
  const events = eventsOf(type, payload, state);
  const usage = events.find((e) => e.type === "usage")?.usage;
  return usage ? { content, events, usage } : { content, events };
}

function eventsOf(type: string | undefined, p: Json, state: ReadState): IrEvent[] {
  const outputIndex = typeof p.output_index === "number" ? p.output_index : 0;
  const delta = typeof p.delta === "string" ? p.delta : "";
  switch (type) {
    case "response.created": {
      const response = isRecord(p.response) ? p.response : {};
      return [{
        type: "start",
        id: String(response.id ?? ""),
        model: String(response.model ?? ""),
      }];
    }
    case "response.output_item.added":
      return isRecord(p.item) ? itemAdded(p.item, { outputIndex, state }) : [];
    case "response.output_text.delta":
      state.deltaSeen.add(outputIndex);
      return delta ? [{ type: "text", text: delta }] : [];
    case "response.refusal.delta":
      state.deltaSeen.add(outputIndex);
      return delta ? [{ type: "refusal", text: delta }] : [];
    case "response.reasoning_summary_text.delta":
    case "response.reasoning_text.delta":
      state.deltaSeen.add(outputIndex);
      return delta ? [{ type: "reasoning", text: delta }] : [];
    case "response.reasoning_summary_part.added":
      // Summary parts are paragraphs; the other formats have one reasoning text.
      return typeof p.summary_index === "number" && p.summary_index > 0
        ? [{ type: "reasoning", text: "\n\n" }]
        : [];
    case "response.function_call_arguments.delta":
      state.argsSeen.add(outputIndex);
      return delta
        ? [{ type: "tool_call_args", index: state.toolIndexOf(outputIndex), args: delta }]
        : [];
    case "response.output_item.done":
      return isRecord(p.item) ? itemDone(p.item, { outputIndex, state }) : [];
    case "response.completed":
    case "response.incomplete":
      return finished(p, state);
    default:
      return [];
  }
}

function itemAdded(item: Json, at: { outputIndex: number; state: ReadState }): IrEvent[] {
  if (item.type !== "function_call") return [];
  const index = at.state.toolIndexOf(at.outputIndex);
  const events: IrEvent[] = [{
    type: "tool_call_start",
    index,
    id: String(item.call_id ?? item.id ?? ""),
    name: String(item.name ?? ""),
  }];
  if (typeof item.arguments === "string" && item.arguments) {
    at.state.argsSeen.add(at.outputIndex);
    events.push({ type: "tool_call_args", index, args: item.arguments });
  }
  return events;
}

/** An item's `done` event, for servers that send whole items without deltas. */
function itemDone(item: Json, at: { outputIndex: number; state: ReadState }): IrEvent[] {
  const { outputIndex, state } = at;
  if (item.type === "function_call") {
    const events = state.toolIndex.has(outputIndex) ? [] : itemAdded(item, at);
    if (state.argsSeen.has(outputIndex) || typeof item.arguments !== "string") return events;
    state.argsSeen.add(outputIndex);
    const args = item.arguments;
    return args
      ? [...events, { type: "tool_call_args", index: state.toolIndexOf(outputIndex), args }]
      : events;
  }
  if (state.deltaSeen.has(outputIndex)) return [];
  return outputItemParts(item).flatMap((part): IrEvent[] => {
    if (part.type === "text" || part.type === "refusal" || part.type === "reasoning") {
      return [{ type: part.type, text: part.text }];
    }
    return [];
  });
}

function finished(p: Json, state: ReadState): IrEvent[] {
  const response = isRecord(p.response) ? p.response : {};
  const calledTools = state.toolIndex.size > 0 ||
    (Array.isArray(response.output) &&
      response.output.some((item) => isRecord(item) && item.type === "function_call"));
  const events: IrEvent[] = [{
    type: "finish",
    reason: responsesFinishToIr(response, { calledTools }),
  }];
  const usage = responsesUsageToIr(response.usage);
  if (usage) events.push({ type: "usage", usage });
  return events;
}

const encoder = new TextEncoder();

type OpenPart = { type: "output_text"; text: string } | { type: "refusal"; refusal: string };

interface MessageState {
  kind: "message";
  index: number;
  id: string;
  parts: OpenPart[];
}

interface ReasoningState {
  kind: "reasoning";
  index: number;
  id: string;
  text: string;
}

interface CallState {
  kind: "function_call";
  index: number;
  id: string;
  callId: string;
  name: string;
  args: string;
  /** Set when the client declared the tool otherwise (namespace, free-form, tool search). */
  client?: IrClientTool;
}

type ItemState = MessageState | ReasoningState | CallState;

/**
 * Writes gateway events as a Responses API stream: the full lifecycle the
 * official SDK's accumulator checks (created → item added → part added →
 * deltas → done events → completed), each event numbered. The terminal event
 * waits for `close()`, since usage may follow the finish reason.
 */
class ResponsesStreamWriter implements ClientStreamEncoder {
  #seq = 0;
  #started = false;
  #ended = false;
  #id: string;
  #createdAt: number;
  /** Every item so far, by output index; open ones are still being written. */
  #items: ItemState[] = [];
  #done = new Set<number>();
  #message: MessageState | null = null;
  #reasoning: ReasoningState | null = null;
  #calls = new Map<number, CallState>();
  #finish: IrFinishReason | undefined;
  #usage: IrUsage = {};

  constructor(private meta: StreamWriterMeta) {
    this.#id = responseId(meta.id);
    this.#createdAt = Math.floor(answerTime(meta) / 1000);
  }

  open(): Uint8Array | null {
    return null;
  }

  encode(event: IrEvent): Uint8Array | null {
    if (this.#ended) return null;
    const out = [...this.#begin(), ...this.#write(event)];
    return out.length ? encoder.encode(out.join("")) : null;
  }

  /**
   * Nothing written means the upstream's own bytes were passed through
   * (same format), and they already ended the response.
   */
  close(): Uint8Array | null {
    if (!this.#started || this.#ended) return null;
    this.#ended = true;
    const out = this.#closeAll();
    const terminal = irFinishToResponses(this.#finish);
    out.push(this.#lifecycle(terminal.event, {
      ...terminal.fields,
      output: this.#items.map((item) => this.#snapshot(item)),
      usage: irUsageToResponses(this.#usage),
    }));
    return encoder.encode(out.join(""));
  }

  /**
   * A response we opened fails as a `response.failed` of that response. When
   * we opened none, the bytes so far (if any) were the upstream's own, whose
   * response id we do not know: an `error` event comes first, which the SDK
   * raises as an APIError carrying the gateway code, then the
   * `response.failed` docs/design.md "Client API" names. The event has the published flat fields
   * and the nested `error` object the SDK prefers, which also gives it a type.
   */
  error(err: GatewayError): Uint8Array {
    const error = failedResponseError(err);
    const out: string[] = [];
    if (!this.#started) {
      const { error: detail } = openAiError(err);
      out.push(
        this.#event("error", {
          code: error.code,
          message: error.message,
          param: err.param ?? null,
          error: detail,
        }),
      );
    }
    this.#ended = true;
    out.push(this.#lifecycle("response.failed", {
      status: "failed",
      error,
      output: this.#items.map((item) => this.#snapshot(item)),
      usage: irUsageToResponses(this.#usage),
    }));
    return encoder.encode(out.join(""));
  }

  #write(event: IrEvent): string[] {
    switch (event.type) {
      case "start":
        return [];
      case "text":
        return this.#messageDelta({ kind: "output_text", text: event.text });
      case "refusal":
        return this.#messageDelta({ kind: "refusal", text: event.text });
      case "reasoning":
        // A signature alone (text "") is Anthropic's to carry: nothing to say here.
        return event.text ? this.#reasoningDelta(event.text) : [];
      case "tool_call_start":
        return this.#callStart(event);
      case "tool_call_args":
        return this.#callArgs(event);
      case "finish":
        this.#finish = event.reason;
        return this.#closeAll();
      case "usage":
        this.#usage = mergeUsage(this.#usage, event.usage);
        return [];
    }
  }

  #begin(): string[] {
    if (this.#started) return [];
    this.#started = true;
    return [
      this.#lifecycle("response.created", {}),
      this.#lifecycle("response.in_progress", {}),
    ];
  }

  #messageDelta(piece: { kind: OpenPart["type"]; text: string }): string[] {
    const out = [...this.#closeReasoning(), ...this.#closeCalls()];
    let message = this.#message;
    if (!message) {
      message = { kind: "message", index: this.#items.length, id: "", parts: [] };
      message.id = itemId("msg", { responseId: this.#id, index: message.index });
      this.#message = message;
      out.push(this.#added(message));
    }
    let part = message.parts.at(-1);
    if (part?.type !== piece.kind) {
      if (part) out.push(...this.#partDone(message));
      part = piece.kind === "output_text"
        ? { type: "output_text", text: "" }
        : { type: "refusal", refusal: "" };
      message.parts.push(part);
      out.push(this.#event("response.content_part.added", {
        ...this.#at(message),
        content_index: message.parts.length - 1,
        part: partJson(part),
      }));
    }
    const at = { ...this.#at(message), content_index: message.parts.length - 1 };
    if (part.type === "output_text") {
      part.text += piece.text;
      out.push(
        this.#event("response.output_text.delta", { ...at, delta: piece.text, logprobs: [] }),
      );
    } else {
      part.refusal += piece.text;
      out.push(this.#event("response.refusal.delta", { ...at, delta: piece.text }));
    }
    return out;
  }

  #partDone(message: MessageState): string[] {
    const part = message.parts.at(-1);
    if (!part) return [];
    const at = { ...this.#at(message), content_index: message.parts.length - 1 };
    const done = part.type === "output_text"
      ? this.#event("response.output_text.done", { ...at, text: part.text, logprobs: [] })
      : this.#event("response.refusal.done", { ...at, refusal: part.refusal });
    return [done, this.#event("response.content_part.done", { ...at, part: partJson(part) })];
  }

  #reasoningDelta(text: string): string[] {
    const out = [...this.#closeMessage(), ...this.#closeCalls()];
    let reasoning = this.#reasoning;
    if (!reasoning) {
      reasoning = { kind: "reasoning", index: this.#items.length, id: "", text: "" };
      reasoning.id = itemId("rs", { responseId: this.#id, index: reasoning.index });
      this.#reasoning = reasoning;
      out.push(this.#added(reasoning));
      out.push(this.#event("response.reasoning_summary_part.added", {
        ...this.#at(reasoning),
        summary_index: 0,
        part: { type: "summary_text", text: "" },
      }));
    }
    reasoning.text += text;
    out.push(this.#event("response.reasoning_summary_text.delta", {
      ...this.#at(reasoning),
      summary_index: 0,
      delta: text,
    }));
    return out;
  }

  #callStart(event: { index: number; id: string; name: string }): string[] {
    const out = [...this.#closeMessage(), ...this.#closeReasoning()];
    if (this.#calls.has(event.index)) return out;
    const call: CallState = {
      kind: "function_call",
      index: this.#items.length,
      id: "",
      callId: event.id,
      name: event.name,
      args: "",
    };
    call.id = itemId("fc", { responseId: this.#id, index: call.index });
    const client = this.meta.clientTools?.[event.name];
    if (client) call.client = client;
    this.#calls.set(event.index, call);
    out.push(this.#added(call));
    return out;
  }

  #callArgs(event: { index: number; args: string }): string[] {
    // Arguments without a start still need an item to belong to.
    const out = this.#calls.has(event.index)
      ? []
      : this.#callStart({ index: event.index, id: `call_${event.index}`, name: "" });
    const call = this.#calls.get(event.index);
    if (!call) return out;
    call.args += event.args;
    // A free-form input or a search's arguments exist only once the JSON is whole.
    if (call.client?.shape) return out;
    out.push(this.#event("response.function_call_arguments.delta", {
      ...this.#at(call),
      delta: event.args,
    }));
    return out;
  }

  #closeAll(): string[] {
    return [...this.#closeMessage(), ...this.#closeReasoning(), ...this.#closeCalls()];
  }

  #closeMessage(): string[] {
    const message = this.#message;
    if (!message) return [];
    this.#message = null;
    return [...this.#partDone(message), this.#itemDone(message)];
  }

  #closeReasoning(): string[] {
    const reasoning = this.#reasoning;
    if (!reasoning) return [];
    this.#reasoning = null;
    const at = { ...this.#at(reasoning), summary_index: 0 };
    const part = { type: "summary_text", text: reasoning.text };
    return [
      this.#event("response.reasoning_summary_text.done", { ...at, text: reasoning.text }),
      this.#event("response.reasoning_summary_part.done", { ...at, part }),
      this.#itemDone(reasoning),
    ];
  }

  #closeCalls(): string[] {
    const out = [...this.#calls.values()].flatMap((call) => [
      ...this.#callInputDone(call),
      this.#itemDone(call),
    ]);
    this.#calls.clear();
    return out;
  }

  #callInputDone(call: CallState): string[] {
    if (call.client?.shape === "tool_search") return [];
    if (call.client?.shape === "custom") {
      const input = customInput(call.args);
      return [
        this.#event("response.custom_tool_call_input.delta", { ...this.#at(call), delta: input }),
        this.#event("response.custom_tool_call_input.done", { ...this.#at(call), input }),
      ];
    }
    return [
      this.#event("response.function_call_arguments.done", {
        ...this.#at(call),
        arguments: call.args,
      }),
    ];
  }

  #added(item: ItemState): string {
    this.#items.push(item);
    return this.#event("response.output_item.added", {
      output_index: item.index,
      item: this.#snapshot(item),
    });
  }

  #itemDone(item: ItemState): string {
    this.#done.add(item.index);
    return this.#event("response.output_item.done", {
      output_index: item.index,
      item: this.#snapshot(item),
    });
  }

  /** The item as the client should see it now. */
  #snapshot(item: ItemState): Json {
    const status = this.#done.has(item.index)
      ? "completed"
      : this.#ended
      ? "incomplete"
      : "in_progress";
    if (item.kind === "message") {
      return messageItem(item.id, { content: item.parts.map(partJson), status });
    }
    if (item.kind === "reasoning") {
      const summary = item.text ? [{ type: "summary_text", text: item.text }] : [];
      return { type: "reasoning", id: item.id, summary };
    }
    return toolCallItem(item.id, {
      id: item.callId,
      name: item.name,
      arguments: item.args,
      status,
    }, this.meta.clientTools);
  }

  #at(item: ItemState): Json {
    return { item_id: item.id, output_index: item.index };
  }

  #lifecycle(type: string, fields: Json): string {
    const base = { id: this.#id, model: this.meta.model, createdAt: this.#createdAt };
    return this.#event(type, { response: responseObject(base, fields) });
  }

  #event(type: string, fields: Json): string {
    const data = { type, ...fields, sequence_number: this.#seq++ };
    return formatSse({ event: type, data: JSON.stringify(data) });
  }
}

function partJson(part: OpenPart): Json {
  return part.type === "output_text"
    ? { type: "output_text", text: part.text, annotations: [], logprobs: [] }
    : { type: "refusal", refusal: part.refusal };
}

interface StreamWriterMeta {
  id: string;
  model: string;
  now?: () => number;
  /** The request's reshaped tools, so calls are named as the client declared them. */
  clientTools?: IrClientTools;
}

/** Writes gateway events as a Responses API stream. */
export function responsesStreamEncoder(meta: StreamWriterMeta): ClientStreamEncoder {
  return new ResponsesStreamWriter(meta);
}
