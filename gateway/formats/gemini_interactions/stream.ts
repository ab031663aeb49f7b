import {
  answerTime,
  type ClientStreamEncoder,
  type StreamMeta,
  type UpstreamFrame,
} from "../format.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import { type IrEvent, type IrFinishReason, type IrUsage, mergeUsage } from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import { sseFrameDecoder, type SseReading } from "../sse_frames.ts";
import { type FrameDecoder, frameStream } from "../frame_decoder.ts";
import { formatSse, type SseEvent } from "../sse_stream.ts";
import { stringOf } from "../gemini/fields.ts";
import { interactionsErrorEvent, interactionsStreamFailure } from "./errors.ts";
import { interactionsEventIsContent } from "./pulse.ts";
import { interactionsEventContinuations } from "./continuations.ts";
import {
  contentText,
  FAILED_STATUSES,
  interactionFailure,
  interactionFinishToIr,
  interactionsUsageToIr,
  irFinishToStatus,
  irUsageToInteractions,
  isoSeconds,
} from "./response.ts";

type Json = Record<string, unknown>;

/** The stream's end marker, after `interaction.completed`: the SDK stops reading at `[DONE]`. */
export const DONE_BLOCK = new TextEncoder().encode("event: done\ndata: [DONE]\n\n");

/**
 * What one upstream stream has said so far: function calls are numbered apart from the steps
 * (the other formats number tool calls on their own), and whether one was made decides a
 * `completed` answer's finish.
 */
class ReadState {
  #calls = new Map<number, number>();

  callIndex(step: number): number {
    let index = this.#calls.get(step);
    if (index === undefined) this.#calls.set(step, index = this.#calls.size);
    return index;
  }

  knownCall(step: number): number | undefined {
    return this.#calls.get(step);
  }

  get calledTools(): boolean {
    return this.#calls.size > 0;
  }
}

/** Frames of an Interactions API SSE stream. */
export function decodeInteractionsStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  return frameStream(interactionsFrameDecoder());
}

export function interactionsFrameDecoder(): FrameDecoder {
  const state = new ReadState();
  return sseFrameDecoder((event, json) => {
    const reading = readInteractionsEvent(event, { payload: json, state });
    // Any event may hand back a continuation token, a failure's included (the SDK resumes from it).
    const continuations = isRecord(json) ? interactionsEventContinuations(json) : [];
    return continuations.length ? { ...reading, continuations } : reading;
  });
}

function readInteractionsEvent(
  event: SseEvent,
  { payload, state }: { payload: unknown; state: ReadState },
): SseReading {
  if (event.data === undefined) return { content: false, events: [] };
  if (event.data.trim() === "[DONE]") return { content: true, events: [], terminal: true };
  const type = isRecord(payload) && typeof payload.event_type === "string"
    ? payload.event_type
    : event.event;
  const content = interactionsEventIsContent(type, payload);
  if (!isRecord(payload)) return { content, events: [] };
  // A bare google.rpc object (no event type) is how Google tells a failure after the 200.
  if (type === "error" || (type === undefined && isRecord(payload.error))) {
    return { content: true, events: [], error: interactionsStreamFailure(payload.error) };
  }
  if (type === "interaction.completed") return completed(payload, state);
  if (type === "interaction.status_update" && FAILED_STATUSES.has(String(payload.status))) {
    return { content: true, events: [], error: interactionFailure(payload) };
  }
  const events = eventsOf(type, payload, state);
  const usage = stepUsage(type, payload);
  return usage ? { content, events, usage } : { content, events };
}

function eventsOf(type: string | undefined, p: Json, state: ReadState): IrEvent[] {
  const index = typeof p.index === "number" ? p.index : 0;
  switch (type) {
    case "interaction.created": {
      const interaction = isRecord(p.interaction) ? p.interaction : {};
      return [{
        type: "start",
        id: stringOf(interaction.id) ?? "",
        model: stringOf(interaction.model) ?? "",
      }];
    }
    case "step.start":
      return isRecord(p.step) ? stepStarted(p.step, { index, state }) : [];
    case "step.delta":
      return isRecord(p.delta) ? deltaEvents(p.delta, { index, state }) : [];
    default:
      return [];
  }
}

/** A step's start: a call is named here; some servers send a step's content whole in its start. */
function stepStarted(step: Json, at: { index: number; state: ReadState }): IrEvent[] {
  switch (step.type) {
    case "function_call": {
      const index = at.state.callIndex(at.index);
      const events: IrEvent[] = [{
        type: "tool_call_start",
        index,
        id: stringOf(step.id) ?? "",
        name: stringOf(step.name) ?? "",
      }];
      const args = isRecord(step.arguments) ? step.arguments : {};
      if (Object.keys(args).length) {
        events.push({ type: "tool_call_args", index, args: JSON.stringify(args) });
      }
      return events;
    }
    case "model_output": {
      const text = contentText(step.content);
      return text ? [{ type: "text", text }] : [];
    }
    case "thought": {
      const text = contentText(step.summary);
      return text ? [{ type: "reasoning", text }] : [];
    }
    default:
      return [];
  }
}

function deltaEvents(delta: Json, at: { index: number; state: ReadState }): IrEvent[] {
  switch (delta.type) {
    case "text":
      return typeof delta.text === "string" && delta.text
        ? [{ type: "text", text: delta.text }]
        : [];
    case "thought_summary": {
      const text = contentText([delta.content]);
      return text ? [{ type: "reasoning", text }] : [];
    }
    case "arguments_delta": {
      const args = typeof delta.arguments === "string" ? delta.arguments : "";
      const index = at.state.knownCall(at.index) ?? at.state.callIndex(at.index);
      return args ? [{ type: "tool_call_args", index, args }] : [];
    }
    default:
      return [];
  }
}

/** `step.stop` may carry the usage so far (Google's agents send it). */
function stepUsage(type: string | undefined, p: Json): IrUsage | undefined {
  return type === "step.stop" ? interactionsUsageToIr(p.usage) : undefined;
}

function completed(p: Json, state: ReadState): SseReading {
  const interaction = isRecord(p.interaction) ? p.interaction : {};
  const status = stringOf(interaction.status);
  if (status !== undefined && FAILED_STATUSES.has(status)) {
    return { content: true, events: [], error: interactionFailure(interaction) };
  }
  const events: IrEvent[] = [{
    type: "finish",
    reason: interactionFinishToIr(status, { calledTools: state.calledTools }),
  }];
  const usage = interactionsUsageToIr(interaction.usage);
  if (usage) events.push({ type: "usage", usage });
  return usage ? { content: true, events, usage } : { content: true, events };
}

const encoder = new TextEncoder();

type OpenStep = { kind: "model_output" | "thought" } | { kind: "function_call"; call: number };

/**
 * Writes gateway events as an Interactions stream, in the order the API sends them:
 * `interaction.created`, then per step `step.start`, its `step.delta`s and `step.stop`, then
 * `interaction.completed` with the usage, and `[DONE]`. The interaction's id is the answer's own
 * (its `start` event) where the upstream named it, so a same-format answer keeps the id the
 * upstream stored it under; else the gateway's request id. The completion waits for `close()`,
 * since usage may follow the finish.
 */
class InteractionsStreamWriter implements ClientStreamEncoder {
  #started = false;
  #ended = false;
  #id: string;
  #model: string;
  #created: string;
  #now: () => number;
  #step = -1;
  #open: OpenStep | null = null;
  /** Step index of each call, by the IR's call index. */
  #calls = new Map<number, number>();
  #finish: IrFinishReason | undefined;
  #usage: IrUsage = {};

  constructor(meta: StreamMeta) {
    this.#now = () => answerTime(meta);
    this.#created = isoSeconds(this.#now());
    this.#id = `pg_${meta.id}`;
    this.#model = meta.model;
  }

  open(): Uint8Array | null {
    return null;
  }

  encode(event: IrEvent): Uint8Array | null {
    if (this.#ended) return null;
    if (event.type === "start") {
      if (!this.#started) {
        if (event.id) this.#id = event.id;
        if (event.model) this.#model = event.model;
      }
      return null;
    }
    const out = [...this.#begin(), ...this.#write(event)];
    return out.length ? encoder.encode(out.join("")) : null;
  }

  /** Nothing written means the upstream's own bytes were passed through, and they ended it. */
  close(): Uint8Array | null {
    if (!this.#started || this.#ended) return null;
    this.#ended = true;
    const out = [...this.#stop()];
    out.push(this.#event("interaction.completed", {
      interaction: this.#interaction(irFinishToStatus(this.#finish), {
        usage: irUsageToInteractions(this.#usage),
        updated: isoSeconds(this.#now()),
      }),
    }));
    return encoder.encode(out.join("") + new TextDecoder().decode(DONE_BLOCK));
  }

  /** The documented `error` event; no `[DONE]` follows it. */
  error(err: GatewayError): Uint8Array {
    this.#ended = true;
    return encoder.encode(
      formatSse({ event: "error", data: JSON.stringify(interactionsErrorEvent(err)) }),
    );
  }

  #write(event: Exclude<IrEvent, { type: "start" }>): string[] {
    switch (event.type) {
      case "text":
      case "refusal":
        return this.#delta("model_output", { type: "text", text: event.text });
      case "reasoning":
        // A signature alone (text "") is Anthropic's to carry: nothing to say here.
        if (!event.text) return [];
        return this.#delta("thought", {
          type: "thought_summary",
          content: { type: "text", text: event.text },
        });
      case "tool_call_start":
        return this.#callStart(event);
      case "tool_call_args":
        return this.#callArgs(event);
      case "finish":
        this.#finish = event.reason;
        return this.#stop();
      case "usage":
        this.#usage = mergeUsage(this.#usage, event.usage);
        return [];
    }
  }

  #begin(): string[] {
    if (this.#started) return [];
    this.#started = true;
    return [
      this.#event("interaction.created", { interaction: this.#interaction("in_progress") }),
    ];
  }

  #delta(kind: "model_output" | "thought", delta: Json): string[] {
    const out: string[] = [];
    if (this.#open?.kind !== kind) {
      out.push(...this.#stop());
      out.push(...this.#start({ kind }, { type: kind }));
    }
    out.push(this.#event("step.delta", { index: this.#step, delta }));
    return out;
  }

  #callStart(event: { index: number; id: string; name: string }): string[] {
    if (this.#calls.has(event.index)) return [];
    const out = this.#stop();
    out.push(
      ...this.#start({ kind: "function_call", call: event.index }, {
        type: "function_call",
        id: event.id,
        name: event.name,
        arguments: {},
      }),
    );
    this.#calls.set(event.index, this.#step);
    return out;
  }

  #callArgs(event: { index: number; args: string }): string[] {
    // Arguments without a start still need a step to belong to.
    const out = this.#calls.has(event.index)
      ? []
      : this.#callStart({ index: event.index, id: `call_${event.index}`, name: "" });
    out.push(this.#event("step.delta", {
      index: this.#calls.get(event.index),
      delta: { type: "arguments_delta", arguments: event.args },
    }));
    return out;
  }

  #start(open: OpenStep, step: Json): string[] {
    this.#open = open;
    this.#step++;
    return [this.#event("step.start", { index: this.#step, step })];
  }

  #stop(): string[] {
    if (!this.#open) return [];
    const index = this.#open.kind === "function_call"
      ? this.#calls.get(this.#open.call) ?? this.#step
      : this.#step;
    this.#open = null;
    return [this.#event("step.stop", { index })];
  }

  #interaction(status: string, extra: Json = {}): Json {
    return {
      id: this.#id,
      status,
      object: "interaction",
      model: this.#model,
      created: this.#created,
      ...extra,
    };
  }

  #event(type: string, fields: Json): string {
    return formatSse({ event: type, data: JSON.stringify({ ...fields, event_type: type }) });
  }
}

/** Writes gateway events as an Interactions stream. */
export function interactionsStreamEncoder(meta: StreamMeta): ClientStreamEncoder {
  return new InteractionsStreamWriter(meta);
}
