import { GatewayError } from "../runtime/gateway_error.ts";
import type { Clock } from "../runtime/clock.ts";
import { isRecord } from "../runtime/json.ts";
import type { RpcResponse } from "./json_rpc.ts";
import type { ServerSession } from "./mcp_sessions.ts";
import { malformed, postMessage, sendAndForget, type ServerTarget } from "./server_wire.ts";

/** What the gateway's requests to a server need besides the target. */
export interface ServerCallDeps {
  clock: Clock;
  fetch: typeof fetch;
  maxBytes: number;
  /** Most notifications one answer may bring (`max_notifications`). */
  maxNotifications: number;
  /** How long the whole request may take (the server's idle timeout: no progress is relayed). */
  timeoutMs: number;
  signal: AbortSignal;
}

/** The gateway's name towards tool servers (`initialize` clientInfo). */
export const GATEWAY_INFO = { name: "pulsegate", version: "1" };

let nextId = 0;

/** A JSON-RPC id of the gateway's own, unique in this process. */
export function gatewayRpcId(): string {
  return `pulsegate-${++nextId}`;
}

/**
 * One request of the gateway's own (initialize, tools/list) answered by its response; what
 * else comes on the stream is dropped (the bound on notifications still holds). Throws a
 * GatewayError (or a WireFailure) when no response comes in time.
 */
export async function serverRequest(
  target: ServerTarget,
  opts: {
    method: string;
    params: Record<string, unknown>;
    session: ServerSession | null;
    deps: ServerCallDeps;
  },
): Promise<RpcResponse & { sessionId: string | null }> {
  const { deps } = opts;
  const id = gatewayRpcId();
  const stop = new AbortController();
  const timeout = new GatewayError(
    `tool server ${target.label} did not answer ${opts.method} within ${deps.timeoutMs / 1000}s`,
    { code: "gw.upstream.idle_timeout" },
  );
  const disarm = deps.clock.after(deps.timeoutMs, () => stop.abort(timeout));
  const onAbort = () => stop.abort(deps.signal.reason);
  deps.signal.addEventListener("abort", onAbort);
  try {
    const answer = await postMessage(target, {
      body: { jsonrpc: "2.0", id, method: opts.method, params: opts.params },
      sessionId: opts.session?.sessionId,
      protocolVersion: opts.session?.protocolVersion,
      signal: stop.signal,
      fetch: deps.fetch,
      maxBytes: deps.maxBytes,
    });
    let notifications = 0;
    for await (const frame of answer.frames) {
      if (frame.kind !== "message") continue;
      if (frame.message.kind === "response" && frame.message.message.id === id) {
        return { ...frame.message.message, sessionId: answer.sessionId };
      }
      if (++notifications > deps.maxNotifications) {
        throw new GatewayError(
          `tool server ${target.label} sent over ${deps.maxNotifications} messages in one answer`,
          { code: "gw.mcp.flood" },
        );
      }
    }
    throw malformed(target.label, `no answer to ${opts.method}`);
  } catch (err) {
    throw stop.signal.aborted ? stop.signal.reason : err;
  } finally {
    disarm();
    deps.signal.removeEventListener("abort", onAbort);
  }
}

/**
 * Opens a server session on one replica (spec "Lifecycle"): initialize with the version the
 * client negotiated with the gateway, then `notifications/initialized`.
 */
export async function openServerSession(
  target: ServerTarget,
  opts: { protocolVersion: string; deps: ServerCallDeps },
): Promise<ServerSession> {
  const answer = await serverRequest(target, {
    method: "initialize",
    params: { protocolVersion: opts.protocolVersion, capabilities: {}, clientInfo: GATEWAY_INFO },
    session: null,
    deps: opts.deps,
  });
  const version = answer.result?.protocolVersion;
  if (!isRecord(answer.result) || typeof version !== "string" || version.length > 64) {
    throw malformed(target.label, "an initialize answer without a protocol version");
  }
  const session = { sessionId: answer.sessionId, protocolVersion: version };
  await sendAndForget(target, {
    body: { jsonrpc: "2.0", method: "notifications/initialized" },
    sessionId: session.sessionId,
    protocolVersion: version,
    fetch: opts.deps.fetch,
    signal: opts.deps.signal,
  });
  return session;
}
