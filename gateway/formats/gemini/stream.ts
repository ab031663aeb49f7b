import type { ClientStreamEncoder, StreamMeta, UpstreamFrame } from "../format.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";
import { type IrEvent, type IrFinishReason, type IrUsage, mergeUsage } from "../ir.ts";
import { isRecord } from "../../runtime/json.ts";
import { sseFrameDecoder, type SseReading } from "../sse_frames.ts";
import { type FrameDecoder, frameStream } from "../frame_decoder.ts";
import { formatSse } from "../sse_stream.ts";
import { upstreamStatusError } from "../upstream_error.ts";
import { geminiError } from "./errors.ts";
import { field, numberOf, stringOf } from "./fields.ts";
import { finishReasonOf, geminiChunkIsContent } from "./pulse.ts";
import {
  argsObject,
  candidateParts,
  firstCandidate,
  geminiFinishToIr,
  geminiToolCallId,
  geminiUsageToIr,
  irFinishToGemini,
  irUsageToGemini,
  promptBlocked,
} from "./response.ts";

interface DecodeState {
  /** Function calls seen so far: the next call's index. */
  calls: number;
  finished: boolean;
}

/** Frames of a `streamGenerateContent?alt=sse` body. */
export function decodeGeminiStream(): ReadableWritablePair<UpstreamFrame, Uint8Array> {
  return frameStream(geminiFrameDecoder());
}

export function geminiFrameDecoder(): FrameDecoder {
  const state: DecodeState = { calls: 0, finished: false };
  return sseFrameDecoder((event, json) => readGeminiEvent(event.data, { chunk: json, state }));
}

function readGeminiEvent(
  data: string | undefined,
  { chunk, state }: { chunk: unknown; state: DecodeState },
): SseReading {
  if (data === undefined) return { content: false, events: [] };
  if (isRecord(chunk) && chunk.error !== undefined) {
    return { content: true, events: [], error: streamError(chunk.error, data) };
  }
  const content = geminiChunkIsContent(chunk);
  if (!isRecord(chunk)) return { content, events: [] };
  const events = chunkEvents(chunk, state);
  // Gemini repeats running usage on every chunk: the frame carries it for the
  // record, but only the closing report becomes an event other formats print.
  const usage = geminiUsageToIr(field(chunk, "usageMetadata"));
  if (usage && (state.finished || !firstCandidate(chunk))) events.push({ type: "usage", usage });
  return { content, events, usage };
}

function streamError(error: unknown, data: string): GatewayError {
  const code = isRecord(error) ? numberOf(error.code) : undefined;
  const status = code !== undefined && code >= 400 && code < 600 ? code : 500;
  return upstreamStatusError(status, { body: data, kind: "gemini" });
}

function chunkEvents(chunk: Record<string, unknown>, state: DecodeState): IrEvent[] {
  const events: IrEvent[] = [];
  const responseId = stringOf(field(chunk, "responseId"));
  const candidate = firstCandidate(chunk);
  for (const part of candidateParts(candidate)) {
    if (!isRecord(part)) continue;
    const call = field(part, "functionCall");
    if (isRecord(call)) {
      // Gemini sends each call whole: a start and its complete arguments.
      const index = state.calls++;
      const id = geminiToolCallId(call, { responseId, index });
      events.push({ type: "tool_call_start", index, id, name: stringOf(call.name) ?? "" });
      events.push({
        type: "tool_call_args",
        index,
        args: JSON.stringify(isRecord(call.args) ? call.args : {}),
      });
    } else if (typeof part.text === "string" && part.text !== "") {
      events.push({ type: part.thought === true ? "reasoning" : "text", text: part.text });
    }
  }
  const reason = candidate ? finishReasonOf(candidate) : undefined;
  if (reason !== undefined) {
    state.finished = true;
    events.push({
      type: "finish",
      reason: geminiFinishToIr(reason, { toolCalled: state.calls > 0 }),
    });
  } else if (!candidate && promptBlocked(chunk)) {
    state.finished = true;
    events.push({ type: "finish", reason: "content_filter" });
  }
  return events;
}

/** How GenerateContentResponse objects, and the error that ends a stream, are laid out on the wire. */
interface Framing {
  open(): string | null;
  element(json: string): string;
  close(): string | null;
  /** The stream's last bytes: a google.rpc error object. */
  error(json: string): string;
  /** The same error again, in a write of its own after `error`, or null. */
  again(json: string): string | null;
}

/**
 * An error after the 200 goes out twice, each in its own write. First as
 * Google's API sends one: the bare error object on a line of its own. Every
 * `@google/genai` since 0.10 raises an `ApiError` (status = `code`) from a
 * network chunk that parses as `{"error": {...}}` whole, and up to 2.30 it
 * read nothing else: a `data: {"error"}` event was handed to the caller as an
 * empty chunk, so the Gemini CLI ended with an empty answer. Then as a
 * `data:` event, the only form a strict SSE reader sees (the Vercel AI SDK's
 * Google provider skips a line that is not an SSE field and ended its stream
 * "interrupted", with no error). Google's SDK has thrown by then. Glued
 * together by a proxy that re-chunks, 1.x is left with a segment it cannot
 * read, which it raises, and 2.32 and later read the `data:` event
 * (docs/formats.md "Gemini errors inside a stream").
 */
function sseFraming(): Framing {
  return {
    open: () => null,
    element: (json) => formatSse({ data: json }),
    close: () => null,
    error: (json) => `${json}\n\n`,
    again: (json) => formatSse({ data: json }),
  };
}

/**
 * `streamGenerateContent` without `alt=sse`: one JSON array, written as it
 * grows. An error is its last element, the same object, and closes it.
 */
function arrayFraming(): Framing {
  let first = true;
  const element = (json: string) => {
    const sep = first ? "" : ",\n";
    first = false;
    return sep + json;
  };
  return {
    open: () => "[",
    element,
    close: () => "]",
    error: (json) => `${element(json)}]`,
    again: () => null,
  };
}

interface PendingCall {
  id: string;
  name: string;
  args: string;
}

const encoder = new TextEncoder();

/**
 * Writes gateway events as GenerateContentResponse chunks. Gemini has no
 * argument deltas, so a tool call is held until its arguments are complete;
 * the finish is held for the usage that follows it, since Gemini reports both
 * in its last chunk. Every chunk carries a part: the SDK drops a chat turn in
 * which any chunk has none.
 */
export function geminiStreamEncoder(meta: StreamMeta): ClientStreamEncoder {
  const framing = meta.sse ? sseFraming() : arrayFraming();
  const calls = new Map<number, PendingCall>();
  let finish: IrFinishReason | undefined;
  let usage: IrUsage | undefined;
  let closed = false;

  const chunk = (candidate: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    framing.element(JSON.stringify({
      candidates: [{ ...candidate, index: 0 }],
      ...extra,
      modelVersion: meta.model,
      responseId: meta.id,
    }));
  const parts = (list: unknown[]) => ({ content: { role: "model", parts: list } });
  const flushCalls = (): string => {
    if (!calls.size) return "";
    const list = [...calls.entries()].sort(([a], [b]) => a - b).map(([, c]) => ({
      functionCall: { id: c.id, name: c.name, args: argsObject(c.args) },
    }));
    calls.clear();
    return chunk(parts(list));
  };
  const closing = (): string => {
    if (closed || (finish === undefined && usage === undefined)) return "";
    closed = true;
    const candidate: Record<string, unknown> = parts([{ text: "" }]);
    if (finish !== undefined) candidate.finishReason = irFinishToGemini(finish);
    return chunk(candidate, usage ? { usageMetadata: irUsageToGemini(usage) } : {});
  };
  const bytes = (text: string) => (text === "" ? null : encoder.encode(text));

  return {
    open: () => bytes(framing.open() ?? ""),
    encode(event) {
      switch (event.type) {
        case "start":
          return null;
        case "text":
        case "refusal":
          return bytes(flushCalls() + chunk(parts([{ text: event.text }])));
        case "reasoning":
          // A signature alone (text "") is Anthropic's to carry: nothing to say here.
          if (!event.text) return null;
          return bytes(flushCalls() + chunk(parts([{ text: event.text, thought: true }])));
        case "tool_call_start":
          calls.set(event.index, { id: event.id, name: event.name, args: "" });
          return null;
        case "tool_call_args": {
          const call = calls.get(event.index);
          if (call) call.args += event.args;
          return null;
        }
        case "finish":
          finish = event.reason;
          return bytes(flushCalls());
        case "usage":
          usage = usage ? mergeUsage(usage, event.usage) : event.usage;
          if (finish === undefined) return null;
          if (!closed) return bytes(closing());
          return bytes(chunk(parts([{ text: "" }]), { usageMetadata: irUsageToGemini(usage) }));
      }
    },
    close: () => bytes(flushCalls() + closing() + (framing.close() ?? "")),
    error: (err: GatewayError) => encoder.encode(framing.error(JSON.stringify(geminiError(err)))),
    errorAgain(err: GatewayError) {
      const again = framing.again(JSON.stringify(geminiError(err)));
      return again === null ? null : encoder.encode(again);
    },
  };
}
