// Inline until deno.json maps these packages (then: "@smithy/eventstream-codec", "@smithy/util-utf8").
import { EventStreamCodec, type Message } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import type { UpstreamFrame } from "../format.ts";
import type { IrEvent } from "../ir.ts";
import { isRecord, parseJson } from "../json.ts";
import { bedrockStreamException, decodeBedrockError } from "./errors.ts";
import { bedrockMessageIsContent, type BedrockMessageKind } from "./pulse.ts";
import { badResponse } from "../../forward/upstream_error.ts";
import { bedrockStopToIr, bedrockUsageToIr } from "./response.ts";

/** What one message means; its raw bytes are added by the framing. */
export type BedrockReading = Omit<UpstreamFrame, "raw">;

/** Checks each message's CRCs and parses its headers; the framing itself is ours (below). */
export const eventStreamCodec = new EventStreamCodec(toUtf8, fromUtf8);

// A message is its 4-byte total length, 4-byte headers length and prelude CRC,
// headers, payload and a message CRC: at least 16 bytes. AWS caps one at 16 MiB.
const MIN_MESSAGE_BYTES = 16;
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024 + 1024;

/** Cuts a byte stream into whole event-stream messages, holding a partial one for the next chunk. */
export class EventStreamSplitter {
  #buffer: Uint8Array = new Uint8Array(0);
  /** Why the stream cannot be framed any further, once that is so. */
  corrupt?: string;

  push(chunk: Uint8Array): Uint8Array[] {
    if (this.corrupt) return [];
    this.#buffer = concat(this.#buffer, chunk);
    const messages: Uint8Array[] = [];
    while (this.#buffer.byteLength >= 4) {
      const total = new DataView(this.#buffer.buffer, this.#buffer.byteOffset, 4).getUint32(0);
      if (total < MIN_MESSAGE_BYTES || total > MAX_MESSAGE_BYTES) {
        this.corrupt = `the upstream's event stream announced a ${total}-byte message`;
        break;
      }
      if (this.#buffer.byteLength < total) break;
      messages.push(this.#buffer.slice(0, total));
      this.#buffer = this.#buffer.subarray(total);
    }
    return messages;
  }

  /** Bytes received that do not yet make a whole message. */
  get rest(): Uint8Array {
    return this.#buffer.slice();
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.byteLength === 0) return b;
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a);
  out.set(b, a.byteLength);
  return out;
}

/** Frames of a ConverseStream body (`application/vnd.amazon.eventstream`), one per message. */
export function decodeBedrockStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  const splitter = new EventStreamSplitter();
  const reader = new ConverseStreamReader();
  let broken = false;
  // After a bad message nothing that follows can be trusted: report once, then drop the rest.
  const fail = (
    controller: TransformStreamDefaultController<UpstreamFrame>,
    opts: { raw: Uint8Array; why: string },
  ) => {
    broken = true;
    controller.enqueue({ raw: opts.raw, content: true, events: [], error: badResponse(opts.why) });
  };
  return new TransformStream<Uint8Array, UpstreamFrame>({
    transform(chunk, controller) {
      if (broken) return;
      for (const raw of splitter.push(chunk)) {
        const message = decodeMessage(raw);
        if (!message) return fail(controller, { raw, why: "the upstream sent a corrupt event" });
        controller.enqueue({ raw, ...reader.read(message) });
      }
      if (splitter.corrupt) fail(controller, { raw: splitter.rest, why: splitter.corrupt });
    },
    flush(controller) {
      const rest = splitter.rest;
      if (!broken && rest.byteLength) {
        fail(controller, { raw: rest, why: "the upstream's event stream ended inside a message" });
      }
    },
  });
}

/** Undefined when a checksum or a header does not add up. */
function decodeMessage(raw: Uint8Array): Message | undefined {
  try {
    return eventStreamCodec.decode(raw);
  } catch {
    return undefined;
  }
}

export function messageKind(message: Message): BedrockMessageKind {
  return {
    messageType: headerString(message, ":message-type") ?? "event",
    eventType: headerString(message, ":event-type"),
  };
}

function headerString(message: Message, name: string): string | undefined {
  const header = message.headers[name];
  return header?.type === "string" ? header.value : undefined;
}

/**
 * Reads ConverseStream events into gateway events. Stateful: Bedrock numbers
 * content blocks (text and tool calls together), the gateway numbers tool calls.
 */
export class ConverseStreamReader {
  #toolIndex = new Map<number, number>();

  read(message: Message): BedrockReading {
    const kind = messageKind(message);
    const content = bedrockMessageIsContent(kind);
    const body = toUtf8(message.body);
    if (kind.messageType === "exception") {
      const type = headerString(message, ":exception-type") ?? "internalServerException";
      return { content, events: [], error: bedrockStreamException(type, body) };
    }
    if (kind.messageType === "error") {
      const text = headerString(message, ":error-message") ?? body;
      const error = decodeBedrockError(500, JSON.stringify({ message: text }), {
        errorType: headerString(message, ":error-code"),
      });
      return { content, events: [], error };
    }
    const payload = parseJson(body);
    const data = isRecord(payload) ? payload : {};
    if (kind.eventType === "metadata") {
      const usage = bedrockUsageToIr(data.usage);
      return usage
        ? { content, events: [{ type: "usage", usage }], usage }
        : { content, events: [] };
    }
    return { content, events: this.#events(kind.eventType, data) };
  }

  // messageStart carries only the role and no id, so it yields no event (as Chat's role chunk).
  #events(eventType: string | undefined, data: Record<string, unknown>): IrEvent[] {
    switch (eventType) {
      case "contentBlockStart":
        return this.#blockStart(data);
      case "contentBlockDelta":
        return this.#blockDelta(data);
      case "messageStop":
        return [{ type: "finish", reason: bedrockStopToIr(data.stopReason) }];
      default:
        return [];
    }
  }

  #blockStart(data: Record<string, unknown>): IrEvent[] {
    const start = isRecord(data.start) ? data.start : {};
    if (!isRecord(start.toolUse)) return [];
    return [{
      type: "tool_call_start",
      index: this.#tool(data.contentBlockIndex),
      id: String(start.toolUse.toolUseId ?? ""),
      name: String(start.toolUse.name ?? ""),
    }];
  }

  #blockDelta(data: Record<string, unknown>): IrEvent[] {
    const delta = isRecord(data.delta) ? data.delta : {};
    if (typeof delta.text === "string" && delta.text) return [{ type: "text", text: delta.text }];
    if (isRecord(delta.toolUse) && typeof delta.toolUse.input === "string" && delta.toolUse.input) {
      return [{
        type: "tool_call_args",
        index: this.#tool(data.contentBlockIndex),
        args: delta.toolUse.input,
      }];
    }
    const reasoning = isRecord(delta.reasoningContent) ? delta.reasoningContent : {};
    if (typeof reasoning.text === "string" && reasoning.text) {
      return [{ type: "reasoning", text: reasoning.text }];
    }
    return [];
  }

  #tool(blockIndex: unknown): number {
    const key = typeof blockIndex === "number" ? blockIndex : -1;
    const known = this.#toolIndex.get(key);
    if (known !== undefined) return known;
    const index = this.#toolIndex.size;
    this.#toolIndex.set(key, index);
    return index;
  }
}
