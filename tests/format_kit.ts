/**
 * What the format suites share: a client encoder run over IR events, its bytes as an HTTP
 * response, and each official SDK answered by a function instead of the network (keeping what
 * it was sent). Nothing here starts a gateway; the end-to-end suites use tests/harness.ts.
 */
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import type { ClientCodec, StreamMeta } from "../gateway/formats/format.ts";
import type { IrEvent } from "../gateway/formats/ir.ts";
import type { GatewayError } from "../gateway/runtime/gateway_error.ts";

const decoder = new TextDecoder();

/** The bytes a client encoder writes for `events`: open, each event, then close or `fail`. */
export function encodeEvents(
  codec: ClientCodec,
  events: IrEvent[],
  opts: { meta?: Partial<StreamMeta>; fail?: GatewayError } = {},
): Uint8Array[] {
  const enc = codec.streamEncoder({ id: "req-1", model: "smart", ...opts.meta });
  const out = [enc.open(), ...events.map((e) => enc.encode(e))];
  out.push(opts.fail ? enc.error(opts.fail) : enc.close());
  return out.filter((b): b is Uint8Array => b !== null);
}

/** The same bytes as one string. */
export function encodeText(...args: Parameters<typeof encodeEvents>): string {
  return encodeEvents(...args).map((b) => decoder.decode(b)).join("");
}

/** Stream bytes as a response, chunk by chunk (SSE unless told otherwise). */
export function streamResponse(
  chunks: (Uint8Array | string)[],
  contentType = "text/event-stream; charset=utf-8",
): Response {
  const encoder = new TextEncoder();
  const bytes = chunks.map((c) => typeof c === "string" ? encoder.encode(c) : c);
  return new Response(ReadableStream.from(bytes), { headers: { "content-type": contentType } });
}

type Reply = () => Response;

/** A fetch that answers `reply` and keeps every request it was sent. */
function replying(reply: Reply) {
  const sent: Request[] = [];
  const fetch = (input: RequestInfo | URL, init?: RequestInit) => {
    sent.push(new Request(input, init));
    return Promise.resolve(reply());
  };
  return { sent, fetch };
}

export function openaiAnswering(reply: Reply): { client: OpenAI; sent: Request[] } {
  const { sent, fetch } = replying(reply);
  const client = new OpenAI({
    apiKey: "test",
    baseURL: "http://127.0.0.1/v1",
    maxRetries: 0,
    fetch,
  });
  return { client, sent };
}

export function anthropicAnswering(reply: Reply): { client: Anthropic; sent: Request[] } {
  const { sent, fetch } = replying(reply);
  const client = new Anthropic({
    apiKey: "test",
    baseURL: "http://127.0.0.1",
    maxRetries: 0,
    fetch,
  });
  return { client, sent };
}

export function genaiAnswering(reply: Reply): { client: GoogleGenAI; sent: Request[] } {
  const { sent, fetch } = replying(reply);
  // The gateway serves /v1beta (docs/design.md "Client API"); SDK 3.x defaults to /v1.
  const httpOptions = { baseUrl: "http://127.0.0.1", apiVersion: "v1beta", fetch };
  return { client: new GoogleGenAI({ apiKey: "test-key", httpOptions }), sent };
}
