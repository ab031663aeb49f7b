/**
 * A fake upstream's answer to whatever an agent asks, in the upstream's own wire format:
 * streamed when the call asks for a stream, whole otherwise, always the same text.
 */
import type { Call, Handler, Script, Step } from "../fake_upstreams/server.ts";
import { chatStream, chatWhole } from "../fake_upstreams/openai_chat_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "../fake_upstreams/openai_responses_script.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import * as geminiFake from "../fake_upstreams/gemini_script.ts";

export type AnswerKind = "openai-chat" | "openai-responses" | "anthropic" | "gemini";

/** The model name every candidate sends upstream. */
export const UPSTREAM_MODEL = "upstream-model";

/** The path of a model call to each kind (Gemini: streamed or whole). */
export const UPSTREAM_PATHS: Record<AnswerKind, RegExp> = {
  "openai-chat": /\/chat\/completions$/,
  "openai-responses": /\/responses$/,
  // Claude Code's `?beta=true` goes on with its body when the upstream speaks its format.
  "anthropic": /^\/v1\/messages(\?beta=true)?$/,
  "gemini": new RegExp(
    `/models/${UPSTREAM_MODEL}:(streamGenerateContent\\?alt=sse|generateContent)$`,
  ),
};

const USAGE = { input: 1200, output: 12 };

/** The text in a few deltas, as a model streams it. */
function pieces(text: string): string[] {
  const words = text.split(/(?<= )/);
  const third = Math.ceil(words.length / 3);
  return [0, 1, 2].map((i) => words.slice(i * third, (i + 1) * third).join("")).filter(Boolean);
}

const wantsStream = (call: Call) => (call.json as { stream?: unknown })?.stream === true;

function sse(chunks: (string | Uint8Array)[]): Script {
  return {
    headers: { "content-type": "text/event-stream" },
    body: chunks.map((send) => ({ send })),
  };
}

function json(body: string): Script {
  return { headers: { "content-type": "application/json" }, body: [{ send: body }] };
}

/**
 * A healthy answer that takes its time: `pieces` words, one every `gapMs` once the first is out
 * (a whole answer: sent after as long). What an operator stops mid-stream.
 */
export function slowAnswerFor(
  kind: AnswerKind,
  opts: { pieces: number; gapMs: number },
): Handler {
  const text = Array.from({ length: opts.pieces }, (_, i) => `word${i} `);
  const quick = answerFor(kind, text.join(""), { split: text });
  return async (call) => {
    const script = await quick(call);
    const isStream = script.headers?.["content-type"] === "text/event-stream";
    if (!isStream) return { ...script, headerDelay: opts.pieces * opts.gapMs };
    const body: Step[] = (script.body ?? []).flatMap((step, i) =>
      i === 0 ? [step] : [{ wait: opts.gapMs }, step]
    );
    return { ...script, body };
  };
}

export function answerFor(
  kind: AnswerKind,
  answer: string,
  opts: { split?: string[] } = {},
): Handler {
  const text = opts.split ?? pieces(answer);
  switch (kind) {
    case "openai-chat":
      return (call) =>
        wantsStream(call) ? chatStream({ text, usage: USAGE }) : chatWhole({ text, usage: USAGE });
    case "openai-responses":
      return (call) =>
        wantsStream(call)
          ? sse(responsesStreamChunks({ text, usage: USAGE }))
          : json(responsesWholeBody({ text, usage: USAGE }));
    case "anthropic":
      return (call) =>
        wantsStream(call)
          ? sse(anthropicFake.streamChunks({ text, usage: USAGE, pingFirst: 1 }))
          : json(anthropicFake.wholeBody({ text, usage: USAGE }));
    case "gemini":
      return (call) =>
        call.path.includes(":streamGenerateContent")
          ? sse(geminiFake.streamChunks({ text, usage: USAGE }))
          : json(geminiFake.wholeBody({ text, usage: USAGE }));
  }
}
