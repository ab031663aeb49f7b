/**
 * Mid-stream resume scripts per prefill-capable upstream kind: a first answer
 * that delivers "Hello, wor" and then breaks, a continuation "ld!", and how
 * to read the trailing assistant text back out of what the fake was sent.
 */
import { isRecord } from "../../gateway/runtime/json.ts";
import * as anthropic from "./anthropic_script.ts";
import { bedrockException, bedrockStreamChunks } from "./bedrock_script.ts";
import * as gemini from "./gemini_script.ts";
import { chatStreamBlocks } from "./openai_chat_script.ts";
import type { Call, Script, Step } from "./server.ts";

export type PrefillKind = "anthropic" | "openai-chat" | "gemini" | "bedrock";
/** How the first answer breaks after its content: a reset, a stall, an error inside the stream. */
export type Fault = "reset" | "stall" | "error";

export interface Usage {
  input: number;
  output: number;
}

export const FIRST_USAGE: Usage = { input: 5, output: 2 };
export const SECOND_USAGE: Usage = { input: 7, output: 3 };

export interface KindScripts {
  /** "Hello, wor", then the fault. */
  first(fault: Fault): Script;
  /** "ld!" and a normal end. */
  second(): Script;
  /** A replay: the whole answer, "Hello, world!" (or `text`), cut otherwise, and a normal end. */
  replay(text?: string[]): Script;
  /** The whole of "Hello, wor" then a tool call starting, then a reset. */
  toolCallThenReset?(): Script;
  /** The last turn of the body the fake got: its role in our words, and its text. */
  lastTurn(call: Call): { role: string; text: string };
  /** What the gateway records of the first answer's usage before it broke. */
  firstReported: Partial<Usage>;
}

const SSE = { "content-type": "text/event-stream" };
const FIRST_TEXT = ["Hello, ", "wor"];
const SECOND_TEXT = ["ld!"];
const REPLAY_TEXT = ["Hel", "lo, world!"];

function faultSteps(fault: Fault, errorBytes: string | Uint8Array): Step[] {
  if (fault === "reset") return [{ reset: true }];
  if (fault === "stall") return [{ hang: true }];
  return [{ send: errorBytes }, { hang: true }];
}

function sends(chunks: (string | Uint8Array)[]): Step[] {
  return chunks.map((send) => ({ send }));
}

function textOf(content: unknown, key = "text"): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => isRecord(p) && typeof p[key] === "string" ? p[key] : "").join("");
}

function lastOf(call: Call, field: string): Record<string, unknown> {
  const body = isRecord(call.json) ? call.json : {};
  const list = Array.isArray(body[field]) ? body[field] : [];
  const last = list.at(-1);
  return isRecord(last) ? last : {};
}

const anthropicScripts: KindScripts = {
  first: (fault) => ({
    headers: SSE,
    body: [
      ...sends(anthropic.streamChunks({ text: FIRST_TEXT, usage: FIRST_USAGE }).slice(0, 4)),
      ...faultSteps(fault, anthropic.errorEvent(529, "Overloaded")),
    ],
  }),
  second: () => ({
    headers: SSE,
    body: sends(anthropic.streamChunks({ text: SECOND_TEXT, usage: SECOND_USAGE })),
  }),
  replay: (text = REPLAY_TEXT) => ({
    headers: SSE,
    body: sends(anthropic.streamChunks({ text, usage: SECOND_USAGE })),
  }),
  lastTurn: (call) => {
    const last = lastOf(call, "messages");
    return { role: String(last.role), text: textOf(last.content) };
  },
  // message_start reports the input and a first output token.
  firstReported: { input: FIRST_USAGE.input, output: 1 },
};

const chatScripts: KindScripts = {
  first: (fault) => ({
    headers: SSE,
    body: [
      ...sends(chatStreamBlocks({ text: FIRST_TEXT }).slice(0, 3)),
      ...faultSteps(
        fault,
        `data: ${JSON.stringify({ error: { message: "overloaded", type: "server_error" } })}\n\n`,
      ),
    ],
  }),
  second: () => ({
    headers: SSE,
    body: sends(chatStreamBlocks({ text: SECOND_TEXT, usage: SECOND_USAGE })),
  }),
  replay: (text = REPLAY_TEXT) => ({
    headers: SSE,
    body: sends(chatStreamBlocks({ text, usage: SECOND_USAGE })),
  }),
  lastTurn: (call) => {
    const last = lastOf(call, "messages");
    return { role: String(last.role), text: textOf(last.content) };
  },
  firstReported: {},
};

const geminiScripts: KindScripts = {
  first: (fault) => ({
    headers: SSE,
    body: [
      // Without the last chunk, which carries the finish reason.
      ...sends(gemini.streamChunks({ text: [...FIRST_TEXT, "!"], usage: FIRST_USAGE }).slice(0, 2)),
      ...faultSteps(fault, gemini.errorEvent(503, "The model is overloaded.")),
    ],
  }),
  second: () => ({
    headers: SSE,
    body: sends(gemini.streamChunks({ text: SECOND_TEXT, usage: SECOND_USAGE })),
  }),
  replay: (text = REPLAY_TEXT) => ({
    headers: SSE,
    body: sends(gemini.streamChunks({ text, usage: SECOND_USAGE })),
  }),
  lastTurn: (call) => {
    const last = lastOf(call, "contents");
    const role = last.role === "model" ? "assistant" : String(last.role);
    return { role, text: textOf(last.parts) };
  },
  // Gemini repeats the running prompt count on every chunk.
  firstReported: { input: FIRST_USAGE.input },
};

const bedrockScripts: KindScripts = {
  first: (fault) => ({
    headers: { "content-type": "application/vnd.amazon.eventstream" },
    body: [
      // messageStart and the two text deltas.
      ...sends(bedrockStreamChunks({ text: FIRST_TEXT, usage: FIRST_USAGE }).slice(0, 3)),
      ...faultSteps(fault, bedrockException("modelStreamErrorException", "stream failed")),
    ],
  }),
  second: () => ({
    headers: { "content-type": "application/vnd.amazon.eventstream" },
    body: sends(bedrockStreamChunks({ text: SECOND_TEXT, usage: SECOND_USAGE })),
  }),
  replay: (text = REPLAY_TEXT) => ({
    headers: { "content-type": "application/vnd.amazon.eventstream" },
    body: sends(bedrockStreamChunks({ text, usage: SECOND_USAGE })),
  }),
  lastTurn: (call) => {
    const last = lastOf(call, "messages");
    return { role: String(last.role), text: textOf(last.content) };
  },
  firstReported: {},
};

export const RESUME_SCRIPTS: Record<PrefillKind, KindScripts> = {
  anthropic: anthropicScripts,
  "openai-chat": chatScripts,
  gemini: geminiScripts,
  bedrock: bedrockScripts,
};

/** An upstream entry of `kind` at `url`; Bedrock's keys come from the env the test passes. */
export function upstreamEntry(
  kind: PrefillKind | "openai-responses",
  opts: { id: string; url: string },
) {
  if (kind === "bedrock") {
    return {
      id: opts.id,
      kind,
      region: "us-east-1",
      access_key_env: "AWS_ACCESS_KEY_ID",
      secret_key_env: "AWS_SECRET_ACCESS_KEY",
      base_url: opts.url,
    } as const;
  }
  return { id: opts.id, kind, base_url: opts.url };
}

export const RESUME_ENV: Record<string, string> = {
  AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
  AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};
