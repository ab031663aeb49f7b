import { authorize, configInForce } from "../accept/admission.ts";
import { readBodyBytes } from "../accept/body_bytes.ts";
import { requireJsonContentType } from "../accept/json_content_type.ts";
import { ERROR_CODE_HEADER, GatewayError } from "../runtime/gateway_error.ts";
import { parseRequestBody } from "../formats/json_guard.ts";
import type { Config } from "../config/schema.ts";
import {
  errorBody,
  invalidRequest,
  readMessage,
  rpcError,
  type RpcId,
  type RpcNotification,
  type RpcRequest,
  type RpcResponse,
  rpcResult,
} from "./json_rpc.ts";
import type { McpSession } from "./mcp_sessions.ts";
import { cancelledByClient } from "./mcp_stops.ts";
import { type McpDeps, startCall } from "./call_request.ts";
import { listTools } from "./tool_list.ts";
import { GATEWAY_INFO } from "./server_requests.ts";

/**
 * The MCP versions /mcp speaks (Streamable HTTP, docs/mcp.md "Supported"), newest first: those of
 * the pinned `@modelcontextprotocol/sdk` that use this transport. 2024-11-05 used the older
 * HTTP+SSE transport, which the gateway does not serve.
 */
export const MCP_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"] as const;

/** The largest message a client may POST (a tool call's arguments included). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

const encoder = new TextEncoder();

/**
 * `/mcp` (docs/mcp.md): POST carries one JSON-RPC message, DELETE ends the session, GET (a
 * stream of the server's own messages) is answered 405 as the spec allows, since the gateway
 * relays no server-initiated requests.
 */
export async function serveMcp(request: Request, deps: McpDeps): Promise<Response> {
  if (request.method === "GET") {
    return new Response(null, { status: 405, headers: { allow: "POST, DELETE" } });
  }
  let config: Config;
  let keyId: string | null;
  try {
    config = configInForce(deps.state);
    keyId = authorize(request, { config, loopback: deps.state.loopback, env: deps.env });
  } catch (err) {
    return httpError(GatewayError.from(err), null);
  }
  const sessionHeader = request.headers.get("mcp-session-id");
  if (request.method === "DELETE") {
    const session = sessionHeader ? deps.mcp.sessions.get(sessionHeader, keyId) : undefined;
    if (!session) return httpError(unknownSession(), null);
    deps.mcp.sessions.end(session);
    return new Response(null, { status: 200 });
  }
  if (request.method !== "POST") {
    return new Response(null, { status: 405, headers: { allow: "POST, GET, DELETE" } });
  }
  let message;
  let bytesIn: number;
  try {
    // As on the model path: a web page's "simple" request (text/plain) is refused unread.
    requireJsonContentType(request);
    const stop = new AbortController();
    const bytes = await readBodyBytes(request, {
      limit: MAX_MESSAGE_BYTES,
      signal: stop.signal,
      clock: deps.clock,
    });
    bytesIn = bytes.byteLength;
    // The JSON guard every request body passes (docs/security.md "Deep JSON").
    const value = await parseRequestBody(bytes);
    if (Array.isArray(value)) {
      throw invalidRequest("JSON-RPC batches are not supported (MCP 2025-06-18 removed them)");
    }
    message = readMessage(value);
    if (!message) throw invalidRequest("the body is not one JSON-RPC 2.0 message");
  } catch (err) {
    return httpError(GatewayError.from(err), null);
  }
  if (message.kind === "request" && message.message.method === "initialize") {
    return initialize(message.message, { keyId, deps });
  }
  const session = sessionHeader ? deps.mcp.sessions.get(sessionHeader, keyId) : undefined;
  if (!session) {
    return sessionHeader
      ? httpError(unknownSession(), idOf(message.message))
      : httpError(invalidRequest("Mcp-Session-Id is required after initialize"), null);
  }
  const version = request.headers.get("mcp-protocol-version");
  if (version !== null && !(MCP_VERSIONS as readonly string[]).includes(version)) {
    return httpError(
      invalidRequest(`unsupported MCP-Protocol-Version '${version.slice(0, 32)}'`),
      null,
    );
  }
  if (message.kind === "notification") {
    notification(message.message, session);
    return new Response(null, { status: 202 });
  }
  if (message.kind === "response") return new Response(null, { status: 202 });
  const rpc = message.message;
  switch (rpc.method) {
    case "ping":
      return json(rpcResult(rpc.id, {}));
    case "tools/list": {
      const tools = await listTools(session, {
        config,
        signal: request.signal,
        deps: {
          state: deps.mcp,
          clock: deps.clock,
          fetch: deps.fetch,
          log: deps.log,
          env: deps.env,
        },
      });
      return json(rpcResult(rpc.id, { tools }));
    }
    case "tools/call":
      return toolCall(request, { rpc, session, config, bytesIn, deps });
    default:
      return json(rpcError(rpc.id, {
        code: -32601,
        message: `method '${rpc.method.slice(0, 64)}' is not served by this gateway (docs/mcp.md)`,
      }));
  }
}

/** Version negotiation (spec "Lifecycle"): the client's version if spoken, else the newest. */
function initialize(rpc: RpcRequest, opts: { keyId: string | null; deps: McpDeps }): Response {
  const asked = rpc.params?.protocolVersion;
  const version = typeof asked === "string" && (MCP_VERSIONS as readonly string[]).includes(asked)
    ? asked
    : MCP_VERSIONS[0];
  const session = opts.deps.mcp.sessions.open({ keyId: opts.keyId, protocolVersion: version });
  if (session instanceof GatewayError) return httpError(session, rpc.id);
  return json(
    rpcResult(rpc.id, {
      protocolVersion: version,
      capabilities: { tools: { listChanged: false } },
      serverInfo: GATEWAY_INFO,
    }),
    { "mcp-session-id": session.id },
  );
}

/** A client's notification: `notifications/cancelled` stops its call; the rest need nothing. */
function notification(message: RpcNotification, session: McpSession): void {
  if (message.method !== "notifications/cancelled") return;
  const id = message.params?.requestId;
  if (typeof id !== "string" && typeof id !== "number") return;
  const live = session.calls.get(String(id));
  if (live && !live.signal.aborted) {
    live.abort(cancelledByClient(message.params?.reason));
  }
}

/**
 * A tool call: over SSE when the client takes it (progress is relayed as it comes), else one
 * JSON answer once the call ends. Either way the answer names the call's request id.
 */
function toolCall(
  request: Request,
  opts: { rpc: RpcRequest; session: McpSession; config: Config; bytesIn: number; deps: McpDeps },
): Promise<Response> | Response {
  const { requestId, run, gone } = startCall(request, opts);
  const headers = { "x-request-id": requestId };
  const accept = request.headers.get("accept") ?? "";
  if (!accept.includes("text/event-stream")) {
    let answer: RpcResponse | null = null;
    return run({
      progress: () => 0,
      end: (response) => {
        answer = response;
        return encoder.encode(JSON.stringify(response)).byteLength;
      },
    }).then(() => json(answer!, headers));
  }
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let open = true;
  const body = new ReadableStream<Uint8Array>({
    start: (c) => void (controller = c),
    // The caller stopped reading: it left, whether or not its connection says so yet.
    cancel: () => {
      open = false;
      gone();
    },
  });
  const send = (message: unknown): number => {
    const bytes = encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    if (!open) return 0;
    try {
      controller.enqueue(bytes);
    } catch {
      open = false;
    }
    return bytes.byteLength;
  };
  run({
    progress: send,
    end: (response) => {
      const sent = send(response);
      if (open) controller.close();
      open = false;
      return sent;
    },
  });
  return new Response(body, {
    headers: { ...headers, "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}

function unknownSession(): GatewayError {
  return new GatewayError("unknown or ended MCP session; initialize a new one", {
    code: "gw.mcp.unknown_session",
  });
}

function idOf(message: RpcRequest | RpcNotification | RpcResponse): RpcId | null {
  return "id" in message ? message.id ?? null : null;
}

function json(body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    headers: { ...headers, "content-type": "application/json" },
  });
}

/** An error before any call: its HTTP status, the JSON-RPC error, the gateway's headers. */
function httpError(err: GatewayError, id: RpcId | null): Response {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "x-pulsegate-error": err.source,
    [ERROR_CODE_HEADER]: err.code,
  };
  if (err.retryAfterSecs !== undefined) headers["retry-after"] = String(err.retryAfterSecs);
  return new Response(JSON.stringify(rpcError(id, errorBody(err))), {
    status: err.status,
    headers,
  });
}
