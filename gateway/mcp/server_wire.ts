import { SseParser } from "../formats/sse_stream.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { parseMessage, type RpcMessage } from "./json_rpc.ts";

/**
 * The gateway as a Streamable HTTP client of one tool server (MCP spec 2025-06-18 and
 * 2025-11-25, "Transports"): each message is a POST; the answer is 202 (a notification), one
 * JSON message, or an SSE stream of messages ending with the response. Every message read goes
 * through the JSON guard and a size bound (docs/mcp.md "Bad input and bad servers").
 */

/** One endpoint of a server: its URL and the headers the gateway authenticates with. */
export interface ServerTarget {
  /** `<server id>#<n>`: the replica's label in history, metrics and cooldown. */
  label: string;
  url: string;
  headers: Record<string, string>;
}

/** What one POST brought, before its body is read. */
export interface WireAnswer {
  status: number;
  /** The `Mcp-Session-Id` the server answered with, if any (an initialize's). */
  sessionId: string | null;
  /** The messages, and keep-alives (SSE comments): these never count as content. */
  frames: AsyncGenerator<WireFrame>;
}

export type WireFrame = { kind: "message"; message: RpcMessage; bytes: number } | {
  kind: "keepalive";
};

/**
 * A POST that failed. `sent` says whether the server may have taken the message: false only
 * when the connection was refused, or the server answered an HTTP error, which the spec says
 * it does when it "cannot accept the input" (404 for a session it no longer has).
 */
export class WireFailure extends Error {
  constructor(
    readonly error: GatewayError,
    readonly opts: { sent: boolean; status?: number },
  ) {
    super(error.message);
  }
}

const JSON_TYPES = "application/json, text/event-stream";
const decoder = new TextDecoder();

/** HTTP errors a server answers before it took the message; 500, 502, 504 may come after. */
function refusedBeforeTaking(status: number): boolean {
  return status < 500 || status === 503;
}

export async function postMessage(
  target: ServerTarget,
  opts: {
    body: unknown;
    sessionId?: string | null;
    protocolVersion?: string;
    signal: AbortSignal;
    fetch: typeof fetch;
    maxBytes: number;
  },
): Promise<WireAnswer> {
  const headers: Record<string, string> = {
    ...target.headers,
    "content-type": "application/json",
    accept: JSON_TYPES,
  };
  if (opts.sessionId) headers["mcp-session-id"] = opts.sessionId;
  if (opts.protocolVersion) headers["mcp-protocol-version"] = opts.protocolVersion;
  let response: Response;
  try {
    response = await opts.fetch(target.url, {
      method: "POST",
      headers,
      body: JSON.stringify(opts.body),
      signal: opts.signal,
    });
  } catch (err) {
    if (opts.signal.aborted) throw opts.signal.reason;
    const refused = /refused|ECONNREFUSED|os error 111/i.test(String(err));
    const error = new GatewayError(`tool server ${target.label} could not be reached`, {
      code: "gw.upstream.unreachable",
      cause: err,
    });
    throw new WireFailure(error, { sent: !refused });
  }
  if (response.status >= 400) {
    await response.body?.cancel().catch(() => {});
    const error = new GatewayError(
      `tool server ${target.label} answered HTTP ${response.status}`,
      { code: response.status === 404 ? "gw.mcp.unknown_session" : "gw.upstream.error" },
    );
    throw new WireFailure(error, {
      sent: !refusedBeforeTaking(response.status),
      status: response.status,
    });
  }
  return {
    status: response.status,
    sessionId: response.headers.get("mcp-session-id"),
    frames: readFrames(response, { label: target.label, maxBytes: opts.maxBytes }),
  };
}

/** A message the gateway could not read, or one over the bound: the server is cut. */
export function malformed(label: string, what: string): GatewayError {
  return new GatewayError(`tool server ${label} sent ${what}`, { code: "gw.mcp.malformed" });
}

function oversized(label: string, maxBytes: number): GatewayError {
  return new GatewayError(
    `tool server ${label} sent a message over the gateway's bound of ${maxBytes} bytes`,
    { code: "gw.mcp.oversized" },
  );
}

async function* readFrames(
  response: Response,
  opts: { label: string; maxBytes: number },
): AsyncGenerator<WireFrame> {
  const type = response.headers.get("content-type") ?? "";
  const body = response.body;
  if (response.status === 202 || body === null) {
    await body?.cancel().catch(() => {});
    return;
  }
  const reader = body.getReader();
  try {
    if (type.includes("text/event-stream")) {
      yield* sseFrames(reader, opts);
      return;
    }
    if (!type.includes("application/json")) {
      throw malformed(opts.label, `an answer of type '${type.slice(0, 100)}'`);
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > opts.maxBytes) throw oversized(opts.label, opts.maxBytes);
      chunks.push(value);
    }
    const text = chunks.map((c) => decoder.decode(c, { stream: true })).join("") +
      decoder.decode();
    if (text.trim() === "") return;
    yield messageFrame(text, { label: opts.label, bytes: size });
  } finally {
    reader.cancel().catch(() => {});
  }
}

async function* sseFrames(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  opts: { label: string; maxBytes: number },
): AsyncGenerator<WireFrame> {
  const parser = new SseParser({ maxEventChars: opts.maxBytes });
  for (;;) {
    const { done, value } = await reader.read();
    const events = done ? parser.end() : parser.push(value);
    if (parser.oversized) throw oversized(opts.label, opts.maxBytes);
    for (const event of events) {
      if (event.data === undefined) {
        yield { kind: "keepalive" };
        continue;
      }
      // An event with empty data primes a client's Last-Event-ID (the SDK's servers send one).
      if (event.data === "") {
        yield { kind: "keepalive" };
        continue;
      }
      yield messageFrame(event.data, { label: opts.label, bytes: event.raw.length });
    }
    if (done) return;
  }
}

function messageFrame(text: string, opts: { label: string; bytes: number }): WireFrame {
  const message = parseMessage(text, { what: `a message from tool server ${opts.label}` });
  if (!message) throw malformed(opts.label, "a message that is not JSON-RPC");
  return { kind: "message", message, bytes: opts.bytes };
}

/** A message a client of the gateway never waits for: sent, its answer dropped unread. */
export function sendAndForget(
  target: ServerTarget,
  opts: {
    body: unknown;
    sessionId: string | null;
    protocolVersion?: string;
    fetch: typeof fetch;
    signal: AbortSignal;
  },
): Promise<void> {
  return postMessage(target, { ...opts, maxBytes: 64 * 1024 })
    .then(async (answer) => {
      // Drained in the background: a 202 has nothing; anything else is read and dropped.
      for await (const _ of answer.frames) { /* dropped */ }
    })
    .catch(() => {});
}

/** DELETE of an upstream session the gateway no longer needs (spec "Session Management"). */
export function endSession(
  target: ServerTarget,
  opts: { sessionId: string; fetch: typeof fetch; signal: AbortSignal },
): Promise<void> {
  return opts.fetch(target.url, {
    method: "DELETE",
    headers: { ...target.headers, "mcp-session-id": opts.sessionId },
    signal: opts.signal,
  }).then((r) => r.body?.cancel()).catch(() => {});
}
