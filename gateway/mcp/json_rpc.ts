import { isRecord } from "../runtime/json.ts";
import { guardedParse } from "../formats/json_guard.ts";
import { GatewayError } from "../runtime/gateway_error.ts";

/**
 * JSON-RPC 2.0 as MCP uses it (https://modelcontextprotocol.io/specification, "Base Protocol"):
 * requests carry an id, notifications none, responses a result or an error. Ids are strings or
 * numbers (never null in MCP).
 */
export type RpcId = string | number;

export interface RpcRequest {
  jsonrpc: "2.0";
  id: RpcId;
  method: string;
  params?: Record<string, unknown>;
}

export interface RpcNotification {
  jsonrpc: "2.0";
  method: string;
  params?: Record<string, unknown>;
}

export interface RpcErrorBody {
  code: number;
  message: string;
  data?: unknown;
}

export interface RpcResponse {
  jsonrpc: "2.0";
  id: RpcId | null;
  result?: Record<string, unknown>;
  error?: RpcErrorBody;
}

export type RpcMessage =
  | { kind: "request"; message: RpcRequest }
  | { kind: "notification"; message: RpcNotification }
  | { kind: "response"; message: RpcResponse };

/** JSON-RPC's own codes (https://www.jsonrpc.org/specification, "Error object"). */
export const RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;

/** An id as MCP allows it: a string of sane length, or a safe integer. */
function isId(value: unknown): value is RpcId {
  return (typeof value === "string" && value.length <= 256) ||
    (typeof value === "number" && Number.isSafeInteger(value));
}

/**
 * One message read as JSON-RPC, or null when it is not one (a batch, a value of the wrong
 * shape). Unknown fields are dropped: only what the gateway reads is kept and passed on.
 */
export function readMessage(value: unknown): RpcMessage | null {
  if (!isRecord(value) || value.jsonrpc !== "2.0") return null;
  const params = value.params;
  if (params !== undefined && !isRecord(params)) return null;
  if (typeof value.method === "string") {
    if (value.method.length > 256) return null;
    if ("id" in value) {
      if (!isId(value.id)) return null;
      return {
        kind: "request",
        message: { jsonrpc: "2.0", id: value.id, method: value.method, params },
      };
    }
    return { kind: "notification", message: { jsonrpc: "2.0", method: value.method, params } };
  }
  const id = value.id === null ? null : isId(value.id) ? value.id : undefined;
  if (id === undefined) return null;
  if (isRecord(value.result)) {
    return { kind: "response", message: { jsonrpc: "2.0", id, result: value.result } };
  }
  const error = value.error;
  if (isRecord(error) && typeof error.code === "number" && Number.isSafeInteger(error.code)) {
    const message = typeof error.message === "string" ? error.message.slice(0, 2000) : "error";
    return {
      kind: "response",
      message: { jsonrpc: "2.0", id, error: { code: error.code, message, data: error.data } },
    };
  }
  return null;
}

/** A text through the JSON guard (depth and value bounds) and then read as one message. */
export function parseMessage(text: string, opts: { what: string }): RpcMessage | null {
  let value: unknown;
  try {
    value = guardedParse(text, { what: opts.what });
  } catch {
    return null;
  }
  return readMessage(value);
}

/** A response carrying an error. */
export function rpcError(id: RpcId | null, error: RpcErrorBody): RpcResponse {
  return { jsonrpc: "2.0", id, error };
}

export function rpcResult(id: RpcId, result: Record<string, unknown>): RpcResponse {
  return { jsonrpc: "2.0", id, result };
}

/**
 * The JSON-RPC code of each gateway error an MCP caller may get (docs/design.md "Errors of /mcp"): the
 * protocol's own where one fits, else one of the implementation-defined server errors
 * (-32000 to -32099). The gateway's code is always in `data.code`, as on every other API.
 */
const RPC_CODE_OF: Partial<Record<GatewayError["code"], number>> = {
  "gw.client.invalid_json": RPC.parseError,
  "gw.client.invalid_request": RPC.invalidRequest,
  "gw.client.unsupported": RPC.methodNotFound,
  "gw.mcp.unknown_tool": RPC.invalidParams,
  "gw.mcp.tool_may_have_run": -32010,
  "gw.mcp.call_timeout": -32011,
  "gw.upstream.idle_timeout": -32011,
  "gw.upstream.unreachable": -32012,
  "gw.upstream.unavailable": -32012,
  "gw.upstream.error": -32012,
  "gw.request.aborted": -32013,
  "gw.session.fenced": -32013,
  "gw.mcp.cancelled": -32013,
  "gw.client.disconnected": -32013,
  "gw.key.rate_limited": -32014,
  "gw.key.max_in_flight": -32014,
  "gw.key.budget_exhausted": -32014,
  "gw.slots.full": -32014,
  "gw.session.loop_detected": -32014,
  "gw.session.budget_exhausted": -32014,
  "gw.mcp.oversized": -32015,
  "gw.mcp.flood": -32015,
  "gw.mcp.malformed": -32015,
  "gw.upstream.oversized": -32015,
  "gw.mcp.unknown_session": -32016,
  "gw.mcp.sessions_full": -32017,
};

/** A gateway error as the JSON-RPC error an MCP caller reads; `requestId` names its row. */
export function errorBody(err: GatewayError, opts: { requestId?: string } = {}): RpcErrorBody {
  const data: Record<string, unknown> = { code: err.code };
  if (opts.requestId !== undefined) data.request_id = opts.requestId;
  if (err.retryAfterSecs !== undefined) data.retry_after_secs = err.retryAfterSecs;
  return { code: RPC_CODE_OF[err.code] ?? RPC.internalError, message: err.message, data };
}

/** A caller's message that is not what MCP allows here. */
export function invalidRequest(message: string): GatewayError {
  return new GatewayError(message, { code: "gw.client.invalid_request" });
}
