/**
 * A scripted Bedrock runtime for tests: real ConverseStream event-stream
 * messages (CRCs and all, encoded by AWS's own codec), Converse JSON bodies,
 * error bodies, and a SigV4 check so a fake server can refuse bad signatures.
 */
// Inline until deno.json maps these packages.
import { AwsV4Signer } from "aws4fetch";
import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";

export type BedrockStopReason =
  | "end_turn"
  | "tool_use"
  | "max_tokens"
  | "stop_sequence"
  | "content_filtered"
  | "guardrail_intervened";

export interface BedrockScript {
  text: string[];
  reasoning?: string[];
  toolCall?: { id: string; name: string; argsPieces: string[] };
  /**
   * As Bedrock counts: `input` leaves out the cache reads and writes, reported beside it;
   * `cacheWrite1h` is the part of `cacheWrite` written for an hour (`cacheDetails`).
   */
  usage: {
    input: number;
    output: number;
    cacheRead?: number;
    cacheWrite?: number;
    cacheWrite1h?: number;
  };
  finish?: BedrockStopReason;
}

export interface BedrockStreamOptions {
  /**
   * Bedrock has no ping event; its only keep-alive is `messageStart`, so a slow
   * opening is played as this many extra `messageStart` messages.
   */
  pingFirst?: number;
  /** Re-cut the bytes into chunks of this size, as a network might. Default: one per message. */
  chunkSize?: number;
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);

// Bedrock pads every event with a "p" field so lengths do not leak content.
const PAD = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN";

/** One `:message-type: event` message, encoded as Bedrock sends it. */
export function bedrockEvent(eventType: string, payload: Record<string, unknown>): Uint8Array {
  return codec.encode({
    headers: {
      ":event-type": { type: "string", value: eventType },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "event" },
    },
    body: fromUtf8(JSON.stringify({ ...payload, p: PAD.slice(0, 7 + eventType.length) })),
  });
}

/** An in-stream exception, e.g. `throttlingException` or `modelStreamErrorException`. */
export function bedrockException(exceptionType: string, message: string): Uint8Array {
  return codec.encode({
    headers: {
      ":exception-type": { type: "string", value: exceptionType },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "exception" },
    },
    body: fromUtf8(JSON.stringify({ message })),
  });
}

function stopReason(script: BedrockScript): BedrockStopReason {
  return script.finish ?? (script.toolCall ? "tool_use" : "end_turn");
}

function usageJson(script: BedrockScript): Record<string, unknown> {
  const { input, output, cacheRead, cacheWrite, cacheWrite1h } = script.usage;
  const usage: Record<string, unknown> = {
    inputTokens: input,
    outputTokens: output,
    totalTokens: input + output + (cacheRead ?? 0) + (cacheWrite ?? 0),
  };
  if (cacheRead !== undefined) usage.cacheReadInputTokens = cacheRead;
  if (cacheWrite !== undefined) {
    usage.cacheWriteInputTokens = cacheWrite;
    // Sorted by lifetime, 1h first, and only the lifetimes written.
    const oneHour = cacheWrite1h ?? 0;
    usage.cacheDetails = [
      ...(oneHour ? [{ ttl: "1h", inputTokens: oneHour }] : []),
      ...(cacheWrite - oneHour ? [{ ttl: "5m", inputTokens: cacheWrite - oneHour }] : []),
    ];
  }
  return usage;
}

/** The ConverseStream body for a script, as the chunks the server writes. */
export function bedrockStreamChunks(
  script: BedrockScript,
  opts: BedrockStreamOptions = {},
): Uint8Array[] {
  const messages: Uint8Array[] = [];
  for (let i = 0; i <= (opts.pingFirst ?? 0); i++) {
    messages.push(bedrockEvent("messageStart", { role: "assistant" }));
  }
  let block = 0;
  const deltas = (pieces: string[], delta: (piece: string) => Record<string, unknown>) => {
    for (const piece of pieces) {
      messages.push(
        bedrockEvent("contentBlockDelta", { contentBlockIndex: block, delta: delta(piece) }),
      );
    }
    messages.push(bedrockEvent("contentBlockStop", { contentBlockIndex: block }));
    block++;
  };
  if (script.reasoning?.length) {
    deltas(script.reasoning, (text) => ({ reasoningContent: { text } }));
  }
  if (script.text.length) deltas(script.text, (text) => ({ text }));
  const call = script.toolCall;
  if (call) {
    messages.push(bedrockEvent("contentBlockStart", {
      contentBlockIndex: block,
      start: { toolUse: { toolUseId: call.id, name: call.name } },
    }));
    deltas(call.argsPieces, (input) => ({ toolUse: { input } }));
  }
  messages.push(bedrockEvent("messageStop", { stopReason: stopReason(script) }));
  messages.push(
    bedrockEvent("metadata", { usage: usageJson(script), metrics: { latencyMs: 412 } }),
  );
  return opts.chunkSize ? rechunk(messages, opts.chunkSize) : messages;
}

function rechunk(messages: Uint8Array[], size: number): Uint8Array[] {
  const all = new Uint8Array(messages.reduce((n, m) => n + m.byteLength, 0));
  let at = 0;
  for (const m of messages) {
    all.set(m, at);
    at += m.byteLength;
  }
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < all.byteLength; i += size) chunks.push(all.slice(i, i + size));
  return chunks;
}

/** The Converse (whole) body for a script. */
export function bedrockWholeBody(script: BedrockScript): string {
  const content: Record<string, unknown>[] = [];
  if (script.reasoning?.length) {
    content.push({
      reasoningContent: { reasoningText: { text: script.reasoning.join(""), signature: "sig-1" } },
    });
  }
  if (script.text.length) content.push({ text: script.text.join("") });
  const call = script.toolCall;
  if (call) {
    const args = call.argsPieces.join("");
    content.push({
      toolUse: { toolUseId: call.id, name: call.name, input: args ? JSON.parse(args) : {} },
    });
  }
  return JSON.stringify({
    output: { message: { role: "assistant", content } },
    stopReason: stopReason(script),
    usage: usageJson(script),
    metrics: { latencyMs: 412 },
  });
}

const exceptionByStatus: Record<number, string> = {
  400: "ValidationException",
  403: "AccessDeniedException",
  404: "ResourceNotFoundException",
  408: "ModelTimeoutException",
  424: "ModelErrorException",
  429: "ThrottlingException",
  500: "InternalServerException",
  503: "ServiceUnavailableException",
};

/** Bedrock's error body: only a message; the exception's name travels in a header. */
export function errorBody(_status: number, message: string): string {
  return JSON.stringify({ message });
}

/** The headers Bedrock sends with an error body. */
export function errorHeaders(status: number): Record<string, string> {
  const type = exceptionByStatus[status] ?? "InternalServerException";
  return {
    "content-type": "application/json",
    "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
    "x-amzn-requestid": "00000000-0000-4000-8000-000000000000",
  };
}

/**
 * Recomputes a request's SigV4 signature from its own X-Amz-Date, signed
 * headers and body with the given keys, and compares it with what it carries.
 */
export async function verifySigV4(
  request: Request,
  creds: { accessKeyId: string; secretAccessKey: string; region: string },
): Promise<boolean> {
  const auth = request.headers.get("authorization");
  const datetime = request.headers.get("x-amz-date");
  const signedNames = /SignedHeaders=([^,\s]+)/.exec(auth ?? "")?.[1]?.split(";");
  if (!auth || !datetime || !signedNames) return false;
  const headers = new Headers();
  for (const name of signedNames) {
    if (name === "host" || name === "x-amz-date") continue;
    const value = request.headers.get(name);
    if (value === null) return false;
    headers.set(name, value);
  }
  const signer = new AwsV4Signer({
    method: request.method,
    url: request.url,
    headers,
    body: new Uint8Array(await request.clone().arrayBuffer()),
    accessKeyId: creds.accessKeyId,
    secretAccessKey: creds.secretAccessKey,
    region: creds.region,
    service: "bedrock",
    datetime,
    allHeaders: true,
  });
  return await signer.authHeader() === auth;
}
