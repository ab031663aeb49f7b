/**
 * Each upstream kind's wire format as the fault matrix needs it: a whole
 * stream cut into chunks, how many of its first chunks are keep-alives, a
 * keep-alive, an in-stream error, a whole body and an error status. Built on
 * the fake upstream scripts, so the bytes are the providers' own.
 */
import type { UpstreamKind } from "../../gateway/formats/format.ts";
import * as anthropic from "../fake_upstreams/anthropic_script.ts";
import * as bedrock from "../fake_upstreams/bedrock_script.ts";
import * as gemini from "../fake_upstreams/gemini_script.ts";
import { chatStreamBlocks, chatWholeBody } from "../fake_upstreams/openai_chat_script.ts";
import * as responses from "../fake_upstreams/openai_responses_script.ts";
import * as interactions from "../fake_upstreams/interactions_script.ts";
import type { Script } from "../fake_upstreams/server.ts";

export type Chunk = string | Uint8Array;

/** A tool call an answer ends with, its arguments' JSON in pieces. */
export interface ToolCall {
  id: string;
  name: string;
  argsPieces: string[];
}

export interface Wire {
  streamType: string;
  /** The whole streamed answer, with its finish and usage; its text, then `toolCall` if given. */
  stream(text: string[], toolCall?: ToolCall): Chunk[];
  /** How many chunks `stream` opens with before its first content (docs/design.md "Pulse" keep-alives). */
  opening: number;
  /** A keep-alive of the format's own (not an SSE comment). */
  ping: Chunk;
  /** An error the provider reports inside a 200 stream. */
  errorEvent: Chunk;
  whole(text: string[]): string;
  /** The provider's error answer for `status`. */
  error(status: number, message: string): Script;
  /** Whether the last chunk of `stream` is only an end marker, after the finish reason. */
  endMarker: boolean;
}

export const USAGE = { input: 11, output: 7 };

const json = { "content-type": "application/json" };

export const WIRES: Record<UpstreamKind, Wire> = {
  "openai-chat": {
    streamType: "text/event-stream",
    stream: (text, toolCall) => chatStreamBlocks({ text, toolCall, usage: USAGE }),
    opening: 1,
    // An empty delta: OpenAI-compatible servers' in-band keep-alive (the role is sent once).
    ping: `data: ${
      JSON.stringify({ choices: [{ index: 0, delta: { content: "" }, finish_reason: null }] })
    }\n\n`,
    errorEvent: `data: ${
      JSON.stringify({ error: { message: "boom", type: "server_error", code: null } })
    }\n\n`,
    whole: (text) => chatWholeBody({ text, usage: USAGE }),
    error: (status, message) => ({
      status,
      headers: json,
      body: [{ send: JSON.stringify({ error: { message, type: "server_error", code: null } }) }],
    }),
    endMarker: true,
  },
  "openai-responses": {
    streamType: "text/event-stream",
    stream: (text, toolCall) =>
      responses.responsesStreamChunks({ text, toolCall, usage: USAGE }, { pingFirst: 0 }),
    opening: 1,
    ping: responses.responsesStreamChunks({ text: [], usage: USAGE }, { pingFirst: 1 })[1]!,
    errorEvent: responses.responsesFailedChunks({ text: [], usage: USAGE }, "boom")[1]!,
    whole: (text) => responses.responsesWholeBody({ text, usage: USAGE }),
    error: (status, message) => ({
      status,
      headers: json,
      body: [{ send: responses.errorBody(status, message) }],
    }),
    endMarker: false,
  },
  "anthropic": {
    streamType: "text/event-stream",
    stream: (text, toolCall) => anthropic.streamChunks({ text, toolCall, usage: USAGE }),
    opening: 1,
    ping: anthropic.streamChunks({ text: [], usage: USAGE, pingFirst: 1 })[1]!,
    errorEvent: anthropic.errorEvent(529, "Overloaded"),
    whole: (text) => anthropic.wholeBody({ text, usage: USAGE }),
    error: (status, message) => ({
      status,
      headers: json,
      body: [{ send: anthropic.errorBody(status, message) }],
    }),
    endMarker: true,
  },
  "gemini": {
    streamType: "text/event-stream",
    stream: (text, toolCall) => gemini.streamChunks({ text, toolCall, usage: USAGE }),
    opening: 0,
    ping: gemini.streamChunks({ text: [], usage: USAGE, pingFirst: 1 })[0]!,
    errorEvent: gemini.errorChunk(500, "Internal error"),
    whole: (text) => gemini.wholeBody({ text, usage: USAGE }),
    error: (status, message) => ({
      status,
      headers: json,
      body: [{ send: gemini.errorBody(status, message) }],
    }),
    endMarker: false,
  },
  "bedrock": {
    streamType: "application/vnd.amazon.eventstream",
    stream: (text, toolCall) => bedrock.bedrockStreamChunks({ text, toolCall, usage: USAGE }),
    opening: 1,
    ping: bedrock.bedrockEvent("messageStart", { role: "assistant" }),
    errorEvent: bedrock.bedrockException("modelStreamErrorException", "boom"),
    whole: (text) => bedrock.bedrockWholeBody({ text, usage: USAGE }),
    error: (status, message) => ({
      status,
      headers: bedrock.errorHeaders(status),
      body: [{ send: bedrock.errorBody(status, message) }],
    }),
    endMarker: false,
  },
  "gemini-interactions": {
    streamType: "text/event-stream",
    stream: (text, toolCall) =>
      interactions.interactionsStreamChunks({ text, toolCall, usage: USAGE }),
    // `interaction.created` and one `interaction.status_update` in progress.
    opening: 2,
    ping: interactions.statusUpdate({}),
    errorEvent: interactions.errorEvent("boom"),
    whole: (text) => interactions.interactionsWholeBody({ text, usage: USAGE }),
    error: (status, message) => ({
      status,
      headers: json,
      body: [{ send: interactions.errorBody(status, message) }],
    }),
    endMarker: true,
  },
};

/** The chunks of `stream(text)` up to and including the first that carries `text[0]`. */
export function upToFirstText(wire: Wire, text: string[]): Chunk[] {
  const chunks = wire.stream(text);
  const at = chunks.findIndex((c) => asText(c).includes(text[0]!));
  if (at < 0) throw new Error("the first text piece is in no chunk");
  return chunks.slice(0, at + 1);
}

export function asText(chunk: Chunk): string {
  return typeof chunk === "string" ? chunk : new TextDecoder("latin1").decode(chunk);
}
