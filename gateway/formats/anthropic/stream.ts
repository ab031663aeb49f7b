import type { ClientStreamEncoder, UpstreamFrame } from "../format.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import { type IrEvent, type IrFinishReason, type IrUsage, mergeUsage } from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import { sseFrameDecoder, type SseReading } from "../sse_frames.ts";
import { type FrameDecoder, frameStream } from "../frame_decoder.ts";
import { formatSse, type SseEvent } from "../sse_stream.ts";
import { anthropicError, anthropicStreamError } from "./errors.ts";
import { isOperatorStop } from "../error_vocab.ts";
import { anthropicEventIsContent, anthropicEventType } from "./pulse.ts";
import {
  anthropicMessageId,
  anthropicStopToIr,
  anthropicUsageToIr,
  irFinishToAnthropic,
  irUsageToAnthropic,
} from "./response.ts";

/** Frames of a Messages SSE stream. */
export function decodeAnthropicStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  return frameStream(anthropicFrameDecoder());
}

export function anthropicFrameDecoder(): FrameDecoder {
  const reader = new AnthropicStreamReader();
  return sseFrameDecoder((event, json) => reader.read(event, json));
}

/**
 * Reads one upstream stream. Anthropic numbers content blocks while the IR
 * numbers tool calls, and reports input usage at the start and output usage
 * at the end; both are tracked here across events.
 */
class AnthropicStreamReader {
  #toolByBlock = new Map<number, number>();
  /**
   * Anthropic's own usage fields as last reported, merged: message_delta's counts are
   * cumulative and may leave a field out or null, and the IR's input is a sum of three of them
   * (anthropicUsageToIr), so the fields are merged before they are added up.
   */
  #reported: Record<string, unknown> = {};

  read(event: SseEvent, data: unknown): SseReading {
    const content = anthropicEventIsContent(event.event, data);
    const type = anthropicEventType(event.event, data);
    if (type === "error") return { content, events: [], error: anthropicStreamError(event.data) };
    if (!isRecord(data)) return { content, events: [] };
    switch (type) {
      case "message_start":
        return this.#messageStart(data);
      case "content_block_start":
        return {
          content,
          events: this.#blockStart(data),
          block: { index: blockIndex(data), open: true },
        };
      case "content_block_stop":
        return { content, events: [], block: { index: blockIndex(data), open: false } };
      case "content_block_delta":
        return { content, events: this.#blockDelta(data) };
      case "message_delta":
        return this.#messageDelta(data);
      case "message_stop":
        return { content, events: [], terminal: true };
      default:
        return { content, events: [] };
    }
  }

  #messageStart(data: Record<string, unknown>): SseReading {
    const message = isRecord(data.message) ? data.message : {};
    const events: IrEvent[] = [{
      type: "start",
      id: String(message.id ?? ""),
      model: String(message.model ?? ""),
    }];
    const usage = this.#report(message.usage);
    if (!usage) return { content: false, events };
    // Recorded on the attempt at once (an idle timeout still bills the prompt);
    // sent on as an event only with the final count, in message_delta.
    return { content: false, events, usage };
  }

  #blockStart(data: Record<string, unknown>): IrEvent[] {
    const block = isRecord(data.content_block) ? data.content_block : {};
    if (block.type === "tool_use") {
      const index = this.#toolByBlock.size;
      this.#toolByBlock.set(blockIndex(data), index);
      return [{
        type: "tool_call_start",
        index,
        id: String(block.id ?? ""),
        name: String(block.name ?? ""),
      }];
    }
    if (block.type === "text" && typeof block.text === "string" && block.text) {
      return [{ type: "text", text: block.text }];
    }
    if (block.type === "thinking" && typeof block.thinking === "string" && block.thinking) {
      return [{ type: "reasoning", text: block.thinking }];
    }
    return [];
  }

  #blockDelta(data: Record<string, unknown>): IrEvent[] {
    const delta = isRecord(data.delta) ? data.delta : {};
    const nonEmpty = (v: unknown): v is string => typeof v === "string" && v !== "";
    if (delta.type === "text_delta" && nonEmpty(delta.text)) {
      return [{ type: "text", text: delta.text }];
    }
    if (delta.type === "thinking_delta" && nonEmpty(delta.thinking)) {
      return [{ type: "reasoning", text: delta.thinking }];
    }
    // The thinking block's signature: kept, so a translated answer's thinking can be sent back.
    if (delta.type === "signature_delta" && nonEmpty(delta.signature)) {
      return [{ type: "reasoning", text: "", signature: delta.signature }];
    }
    if (delta.type === "input_json_delta" && nonEmpty(delta.partial_json)) {
      const index = this.#toolByBlock.get(blockIndex(data));
      // Server tools stream input too; only client tool calls become IR calls.
      if (index !== undefined) return [{ type: "tool_call_args", index, args: delta.partial_json }];
    }
    return [];
  }

  #messageDelta(data: Record<string, unknown>): SseReading {
    const events: IrEvent[] = [];
    const delta = isRecord(data.delta) ? data.delta : {};
    if (delta.stop_reason !== null && delta.stop_reason !== undefined) {
      events.push({ type: "finish", reason: anthropicStopToIr(delta.stop_reason) });
    }
    const usage = this.#report(data.usage);
    if (!usage) return { content: true, events };
    events.push({ type: "usage", usage });
    return { content: true, events, usage };
  }

  /** The usage so far, with this event's fields merged in; undefined when it carries none. */
  #report(usage: unknown): IrUsage | undefined {
    if (!isRecord(usage)) return undefined;
    for (const [field, value] of Object.entries(usage)) {
      if (value !== null && value !== undefined) this.#reported[field] = value;
    }
    return anthropicUsageToIr(this.#reported);
  }
}

function blockIndex(data: Record<string, unknown>): number {
  return typeof data.index === "number" ? data.index : 0;
}

const encoder = new TextEncoder();

function sse(type: string, payload: Record<string, unknown>): string {
  return formatSse({ event: type, data: JSON.stringify({ type, ...payload }) });
}

type BlockKind = "text" | "thinking" | "tool_use";

/**
 * Writes gateway events as a Messages stream: message_start, one
 * start/delta/stop run per block, then message_delta and message_stop.
 * Finish and usage come as separate IR events in either order, so both are
 * held for the closing message_delta. Nothing is written until the first
 * event, so a pass-through stream (which never calls encode) gets no second
 * message_stop on close.
 */
class AnthropicStreamEncoder implements ClientStreamEncoder {
  #started = false;
  #open: { kind: BlockKind; index: number } | null = null;
  #blocks = 0;
  #toolBlocks = new Map<number, number>();
  #finish: IrFinishReason = "stop";
  #usage: IrUsage = {};

  constructor(private meta: { id: string; model: string }) {}

  open(): Uint8Array | null {
    return null;
  }

  encode(event: IrEvent): Uint8Array | null {
    if (event.type === "usage") {
      this.#usage = mergeUsage(this.#usage, event.usage);
      return null;
    }
    const out = [this.#begin()];
    switch (event.type) {
      case "start":
        break;
      case "text":
      case "refusal":
        out.push(this.#block("text"), this.#delta({ type: "text_delta", text: event.text }));
        break;
      case "reasoning":
        out.push(this.#block("thinking"));
        if (event.text) out.push(this.#delta({ type: "thinking_delta", thinking: event.text }));
        if (event.signature) {
          out.push(this.#delta({ type: "signature_delta", signature: event.signature }));
        }
        break;
      case "tool_call_start":
        out.push(this.#toolStart(event));
        break;
      case "tool_call_args":
        out.push(this.#toolArgs(event));
        break;
      case "finish":
        this.#finish = event.reason;
        break;
    }
    const text = out.join("");
    return text ? encoder.encode(text) : null;
  }

  close(): Uint8Array | null {
    if (!this.#started) return null;
    const stopReason = irFinishToAnthropic(this.#finish, { toolCalls: this.#toolBlocks.size > 0 });
    return encoder.encode(
      this.#stopOpen() +
        sse("message_delta", {
          delta: { stop_reason: stopReason, stop_sequence: null },
          usage: irUsageToAnthropic(this.#usage),
        }) +
        sse("message_stop", {}),
    );
  }

  error(err: GatewayError): Uint8Array {
    const event = formatSse({ event: "error", data: JSON.stringify(anthropicError(err)) });
    return encoder.encode(isOperatorStop(err) ? this.#endBlocks() + event : event);
  }

  passed(frame: UpstreamFrame): void {
    if (frame.events.some((e) => e.type === "start")) this.#started = true;
    const { block } = frame;
    if (!block) return;
    this.#open = block.open ? { kind: "text", index: block.index } : null;
    this.#blocks = Math.max(this.#blocks, block.index + 1);
  }

  /**
   * Claude Code re-sends a turn (non-streamed) whose stream failed before a content block ended,
   * whatever the error; after one ended, it takes an error that is not a server's as final
   * (docs/design.md "Abort and disconnect"). So an operator's stop first closes the open block,
   * or ends an empty one where none ended yet: nothing is added to the answer.
   */
  #endBlocks(): string {
    const begin = this.#begin();
    if (this.#open) return begin + this.#stopOpen();
    if (this.#blocks > 0) return begin;
    return begin + this.#startBlock("text", { type: "text", text: "" }) + this.#stopOpen();
  }

  #begin(): string {
    if (this.#started) return "";
    this.#started = true;
    const usage = irUsageToAnthropic(this.#usage);
    return sse("message_start", {
      message: {
        id: anthropicMessageId(this.meta.id),
        type: "message",
        role: "assistant",
        model: this.meta.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage,
      },
    });
  }

  /** Opens a block of `kind` unless one is already open. */
  #block(kind: "text" | "thinking"): string {
    if (this.#open?.kind === kind) return "";
    const contentBlock = kind === "text"
      ? { type: "text", text: "" }
      : { type: "thinking", thinking: "", signature: "" };
    return this.#startBlock(kind, contentBlock);
  }

  #startBlock(kind: BlockKind, contentBlock: Record<string, unknown>): string {
    const stop = this.#stopOpen();
    const index = this.#blocks++;
    this.#open = { kind, index };
    return stop + sse("content_block_start", { index, content_block: contentBlock });
  }

  #stopOpen(): string {
    if (!this.#open) return "";
    const { index } = this.#open;
    this.#open = null;
    return sse("content_block_stop", { index });
  }

  #delta(delta: Record<string, unknown>): string {
    return sse("content_block_delta", { index: this.#open?.index ?? 0, delta });
  }

  #toolStart(event: { index: number; id: string; name: string }): string {
    const start = this.#startBlock("tool_use", {
      type: "tool_use",
      id: event.id,
      name: event.name,
      input: {},
    });
    this.#toolBlocks.set(event.index, this.#blocks - 1);
    return start;
  }

  /**
   * Arguments go to their call's block. A stream that interleaves calls (which
   * Anthropic cannot) still lands each piece on the right block index.
   */
  #toolArgs(event: { index: number; args: string }): string {
    const known = this.#toolBlocks.get(event.index);
    const prefix = known === undefined
      ? this.#toolStart({ index: event.index, id: `toolu_${event.index}`, name: "" })
      : "";
    const index = this.#toolBlocks.get(event.index) ?? 0;
    return prefix +
      sse("content_block_delta", {
        index,
        delta: { type: "input_json_delta", partial_json: event.args },
      });
  }
}

/** Writes gateway events as an Anthropic Messages stream. */
export function anthropicStreamEncoder(meta: { id: string; model: string }): ClientStreamEncoder {
  return new AnthropicStreamEncoder(meta);
}
