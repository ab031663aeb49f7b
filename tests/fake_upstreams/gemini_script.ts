/**
 * Realistic Gemini generateContent responses from a small script, for fake
 * upstreams served over HTTP. Pure functions: the caller decides timing.
 * Gemini frames SSE events with CRLF and repeats running usage on every chunk.
 */

/** Native finish reasons, or the IR's names for them. */
export type GeminiFinish =
  | "STOP"
  | "MAX_TOKENS"
  | "SAFETY"
  | "RECITATION"
  | "MALFORMED_FUNCTION_CALL"
  | "OTHER"
  | "stop"
  | "length"
  | "tool_calls"
  | "content_filter";

export interface GeminiScript {
  /** Text deltas, one chunk each. */
  text: string[];
  /** Thought-summary deltas, sent before the text. */
  thinking?: string[];
  /** Gemini sends a call whole: the pieces are joined and parsed into `args`. */
  toolCall?: { id: string; name: string; argsPieces: string[] };
  /** Older Gemini models send function calls without an id. */
  omitCallId?: boolean;
  /** output counts every generated token, thoughts included (as the gateway records it). */
  usage: { input: number; output: number; cached?: number; thoughts?: number };
  /** Default STOP (Gemini ends a function-calling turn with STOP too). */
  finish?: GeminiFinish;
  /** Chunks with no parts and no finish reason sent first: Gemini's only keep-alive. */
  pingFirst?: number;
  id?: string;
  model?: string;
}

type Json = Record<string, unknown>;

const irFinish: Record<string, string> = {
  stop: "STOP",
  length: "MAX_TOKENS",
  tool_calls: "STOP",
  content_filter: "SAFETY",
};

const statusNames: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

function finishReason(script: GeminiScript): string {
  const finish = script.finish ?? "STOP";
  return irFinish[finish] ?? finish;
}

function envelope(script: GeminiScript, fields: Json): Json {
  return {
    ...fields,
    modelVersion: script.model ?? "gemini-2.5-flash",
    responseId: script.id ?? "mPq7aOfXBIvVnvgPnu6JsQk",
  };
}

function runningUsage(script: GeminiScript): Json {
  const input = script.usage.input;
  return {
    promptTokenCount: input,
    totalTokenCount: input,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: input }],
  };
}

function finalUsage(script: GeminiScript): Json {
  const { input, output, cached, thoughts } = script.usage;
  const usage: Json = {
    promptTokenCount: input,
    candidatesTokenCount: output - (thoughts ?? 0),
    totalTokenCount: input + output,
    promptTokensDetails: [{ modality: "TEXT", tokenCount: input }],
  };
  if (cached !== undefined) usage.cachedContentTokenCount = cached;
  if (thoughts !== undefined) usage.thoughtsTokenCount = thoughts;
  return usage;
}

function candidate(parts: Json[] | null, finish?: string): Json {
  const c: Json = { content: parts ? { parts, role: "model" } : { role: "model" }, index: 0 };
  if (finish) c.finishReason = finish;
  return c;
}

function callPart(script: GeminiScript): Json | null {
  const call = script.toolCall;
  if (!call) return null;
  const joined = call.argsPieces.join("");
  const functionCall: Json = { name: call.name, args: joined ? JSON.parse(joined) : {} };
  if (!script.omitCallId) functionCall.id = call.id;
  return { functionCall, thoughtSignature: "CiQBVKhc7mFakeSignatureForTestsOnly0123456789" };
}

function sse(body: Json): string {
  return `data: ${JSON.stringify(body)}\r\n\r\n`;
}

/** How many chunks open the stream as keep-alives. */
export function keepAliveCount(script: GeminiScript): number {
  return script.pingFirst ?? 0;
}

/**
 * The `streamGenerateContent?alt=sse` body, one event per chunk: keep-alives,
 * thoughts, text, then the function call; the last content chunk carries the
 * finish reason and the final usage, as Gemini sends them.
 */
export function streamChunks(script: GeminiScript): (Uint8Array | string)[] {
  const pieces: Json[][] = [
    ...(script.thinking ?? []).map((t) => [{ text: t, thought: true }]),
    ...script.text.map((t) => [{ text: t }]),
  ];
  const call = callPart(script);
  if (call) pieces.push([call]);
  if (!pieces.length) pieces.push([{ text: "" }]);
  const chunks: string[] = [];
  for (let i = 0; i < keepAliveCount(script); i++) {
    chunks.push(sse(envelope(script, {
      candidates: [candidate(null)],
      usageMetadata: runningUsage(script),
    })));
  }
  pieces.forEach((parts, i) => {
    const last = i === pieces.length - 1;
    chunks.push(sse(envelope(script, {
      candidates: [candidate(parts, last ? finishReason(script) : undefined)],
      usageMetadata: last ? finalUsage(script) : runningUsage(script),
    })));
  });
  return chunks;
}

/** The `generateContent` body: one candidate with every part, pretty-printed as Google does. */
export function wholeBody(script: GeminiScript): string {
  const parts: Json[] = [];
  if (script.thinking?.length) parts.push({ text: script.thinking.join(""), thought: true });
  if (script.text.length) parts.push({ text: script.text.join("") });
  const call = callPart(script);
  if (call) parts.push(call);
  return JSON.stringify(
    envelope(script, {
      candidates: [candidate(parts.length ? parts : [{ text: "" }], finishReason(script))],
      usageMetadata: finalUsage(script),
    }),
    null,
    2,
  );
}

function errorJson(status: number, message: string): Json {
  return { error: { code: status, message, status: statusNames[status] ?? "UNKNOWN" } };
}

/** A whole error response body in Google's shape. */
export function errorBody(status: number, message: string): string {
  return JSON.stringify(errorJson(status, message), null, 2);
}

/**
 * An error Gemini reports inside an SSE stream after the 200: the bare,
 * pretty-printed error object, with no `data:` field (what Google's SDKs
 * parse a network chunk for; see docs/architecture.md).
 */
export function errorChunk(status: number, message: string): string {
  return `${errorBody(status, message)}\n`;
}

/** The same error as an SSE event, as some Gemini-compatible proxies send it. */
export function errorEvent(status: number, message: string): string {
  return sse(errorJson(status, message));
}
