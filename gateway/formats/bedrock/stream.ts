// Inline until deno.json maps these packages (then: "@smithy/eventstream-codec", "@smithy/util-utf8").
import { EventStreamCodec, type Message } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import type { UpstreamFrame } from "../format.ts";
import type { IrEvent } from "../ir.ts";
import { isRecord, parseJson } from "../../runtime/json.ts";
import { bedrockStreamException, decodeBedrockError } from "./errors.ts";
import { bedrockMessageIsContent, type BedrockMessageKind } from "./pulse.ts";
import { badResponse } from "../upstream_error.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import { oversized, UPSTREAM_CAPS } from "../upstream_caps.ts";
import { bedrockStopToIr, bedrockUsageToIr } from "./response.ts";

/** What one message means; its raw bytes are added by the framing. */
export type BedrockReading = Omit<UpstreamFrame, "raw">;

/** Checks each message's CRCs and parses its headers; the framing itself is ours (below). */
export const eventStreamCodec = new EventStreamCodec(toUtf8, fromUtf8);

// A message is its 4-byte total length, 4-byte headers length and prelude CRC,
// headers, payload and a message CRC: at least 16 bytes. AWS caps one at 16 MiB
// (a length beyond is not a message at all: the stream is corrupt), and we hold at
// most one event's cap (docs/security.md, "Upstream bytes are capped").
const MIN_MESSAGE_BYTES = 16;
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024 + 1024;

/**
 * Cuts a byte stream into whole event-stream messages, holding a partial one
 * for the next chunk. Linear: chunks are kept as they came and copied once,
 * into the message they complete.
 */
export class EventStreamSplitter {
  #chunks: Uint8Array[] = [];
  #size = 0;
  readonly #max: number;
  /** Why the stream cannot be framed any further, once that is so. */
  failure?: GatewayError;

  constructor(opts: { maxMessageBytes?: number } = {}) {
    this.#max = opts.maxMessageBytes ?? UPSTREAM_CAPS.eventBytes;
  }

  push(chunk: Uint8Array): Uint8Array[] {
    if (this.failure) return [];
    if (chunk.byteLength) {
      this.#chunks.push(chunk);
      this.#size += chunk.byteLength;
    }
    const messages: Uint8Array[] = [];
    while (this.#size >= 4) {
      const total = new DataView(this.#peek(4).buffer).getUint32(0);
      if (total < MIN_MESSAGE_BYTES || total > MAX_MESSAGE_BYTES) {
        this.failure = badResponse(`the upstream's event stream announced a ${total}-byte message`);
        break;
      }
      if (total > this.#max) {
        this.failure = oversized(`a ${total}-byte event-stream message`, this.#max);
        break;
      }
      if (this.#size < total) break;
      messages.push(this.#take(total));
    }
    return messages;
  }

  /** Bytes received that do not yet make a whole message. */
  get rest(): Uint8Array {
    return this.#peek(this.#size);
  }

  /** A copy of the first `n` held bytes. */
  #peek(n: number): Uint8Array {
    const out = new Uint8Array(n);
    let at = 0;
    for (const chunk of this.#chunks) {
      if (at >= n) break;
      const part = chunk.subarray(0, n - at);
      out.set(part, at);
      at += part.byteLength;
    }
    return out;
  }

  /** The first `n` held bytes, removed. */
  #take(n: number): Uint8Array {
    const out = this.#peek(n);
    let left = n;
    let used = 0;
    for (const chunk of this.#chunks) {
      if (chunk.byteLength > left) break;
      left -= chunk.byteLength;
      used++;
    }
    this.#chunks.splice(0, used);
    if (left > 0) this.#chunks[0] = this.#chunks[0]!.subarray(left);
    this.#size -= n;
    return out;
  }
}

/** Frames of a ConverseStream body (`application/vnd.amazon.eventstream`), one per message. */
export function decodeBedrockStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  const splitter = new EventStreamSplitter();
  const reader = new ConverseStreamReader();
  let broken = false;
  // After a bad message nothing that follows can be trusted: report once, then drop the rest.
  const fail = (
    controller: TransformStreamDefaultController<UpstreamFrame>,
    opts: { raw: Uint8Array; error: GatewayError },
  ) => {
    broken = true;
    controller.enqueue({ raw: opts.raw, content: true, events: [], error: opts.error });
  };
  return new TransformStream<Uint8Array, UpstreamFrame>({
    transform(chunk, controller) {
      if (broken) return;
      for (const raw of splitter.push(chunk)) {
        const message = decodeMessage(raw);
        if (!message) {
          return fail(controller, { raw, error: badResponse("the upstream sent a corrupt event") });
        }
        controller.enqueue({ raw, ...reader.read(message) });
      }
      if (splitter.failure) fail(controller, { raw: new Uint8Array(0), error: splitter.failure });
    },
    flush(controller) {
      const rest = splitter.rest;
      if (!broken && rest.byteLength) {
        const error = badResponse("the upstream's event stream ended inside a message");
        fail(controller, { raw: rest, error });
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
    // Claude's thinking signature, so the thinking can be sent back in the next turn.
    if (typeof reasoning.signature === "string" && reasoning.signature) {
      return [{ type: "reasoning", text: "", signature: reasoning.signature }];
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
