import type { Config } from "../config/schema.ts";
import { configKey } from "../config/config_keys.ts";
import type { ProxyDeps } from "../accept/proxy.ts";
import { keyInFlight } from "../accept/proxy.ts";
import { LiveRequest } from "../live/live_request.ts";
import type { Billing } from "../live/billing.ts";
import { newRequestId } from "../live/request_id.ts";
import { incomingTrace } from "../live/trace_context.ts";
import { admitKey } from "../policy/key_limits.ts";
import { bodyDigest, SessionLimits } from "../policy/session_limits.ts";
import { clientDisconnected } from "../forward/stop_reasons.ts";
import { boundedSession } from "../formats/session_ids.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { isRecord } from "../runtime/json.ts";
import {
  errorBody,
  rpcError,
  type RpcId,
  type RpcNotification,
  type RpcRequest,
  type RpcResponse,
} from "./json_rpc.ts";
import type { McpSession } from "./mcp_sessions.ts";
import type { McpState } from "./mcp_state.ts";
import { callTimeout } from "./mcp_stops.ts";
import {
  keyMayUseTool,
  serverFor,
  serverLiveness,
  serverTargets,
  splitToolName,
} from "./server_targets.ts";
import { runToolCall, type ToolAnswer } from "./tool_call.ts";

export interface McpDeps extends ProxyDeps {
  mcp: McpState;
}

/** The session headers an agent names its conversation by, as on the model path. */
const SESSION_HEADERS = ["x-session-id", "x-claude-code-session-id"];

/** Where a call's messages go: progress as they come, then its one response. */
export interface CallOutput {
  progress(notification: RpcNotification): number;
  /** Sends the response; answers the bytes it took. */
  end(response: RpcResponse): number;
}

/**
 * One `tools/call` from arrival to its recorded end (docs/mcp.md "Tool calls: liveness and failover"): a row of its
 * own under a generated request id (`x-request-id` of the answer), registered for aborts (by
 * id, and by session with the model path's session ids), the key's places and rpm taken as a
 * request's, its session's loop breaker fed the tool's name and arguments. The row's status
 * is the error's HTTP equivalent (499 for a caller who left) though the wire says it in a
 * JSON-RPC error.
 */
export function startCall(
  request: Request,
  opts: {
    rpc: RpcRequest;
    session: McpSession;
    config: Config;
    bytesIn: number;
    deps: McpDeps;
  },
): { requestId: string; run: (out: CallOutput) => Promise<void>; gone: () => void } {
  const { rpc, session, config, deps } = opts;
  const id = newRequestId(deps.clock.now());
  const named = SESSION_HEADERS.map((h) => request.headers.get(h)?.trim()).find((v) => v);
  const params = rpc.params ?? {};
  const name = typeof params.name === "string" ? params.name.slice(0, 256) : null;
  const live = new LiveRequest({
    id,
    instanceId: deps.instanceId,
    clientFormat: "mcp",
    route: name,
    stream: false,
    keyId: session.keyId,
    sessionId: boundedSession(named ?? session.id),
    trace: incomingTrace(request.headers, { recording: deps.state.tracing?.() ?? false }),
  }, { clock: deps.clock, sink: deps.sink, metrics: deps.metrics });
  live.tool({ bytesIn: opts.bytesIn });
  deps.registry.add(live);
  session.calls.set(String(rpc.id), live);
  deps.metrics.inflight++;
  const onClientGone = () => live.abort(clientDisconnected());
  request.signal.addEventListener("abort", onClientGone);
  let settle!: () => void;
  const ended = new Promise<void>((resolve) => (settle = resolve));
  deps.pending.add(ended);
  const releases: (() => void)[] = [];
  const run = async (out: CallOutput) => {
    let bytesOut = 0;
    let failure: GatewayError | undefined;
    try {
      const answer = await callTool(live, {
        rpc,
        name,
        session,
        config,
        releases,
        relay: (n) => (bytesOut += out.progress(n)),
        deps,
      });
      if (answer instanceof GatewayError) {
        failure = answer;
        bytesOut += out.end(rpcError(rpc.id, errorBody(answer, { requestId: id })));
      } else {
        live.contentSent();
        bytesOut += out.end(answerOf(rpc.id, answer));
      }
    } catch (err) {
      failure = GatewayError.from(err);
      bytesOut += out.end(rpcError(rpc.id, errorBody(failure, { requestId: id })));
    } finally {
      live.tool({ bytesOut });
      live.finish(failure ? { status: failure.status, error: failure } : { status: 200 });
      const server = live.metricsRoute?.slice(4) ?? "unknown";
      deps.metrics.mcpToolCalls.inc({ server, outcome: failure ? "error" : "success" });
      deps.metrics.mcpToolDuration.observe(
        { server },
        deps.clock.elapsed(live.record.startedAt, live.record.endedAt ?? undefined) / 1000,
      );
      for (const release of releases) release();
      request.signal.removeEventListener("abort", onClientGone);
      deps.registry.drop(live);
      session.callEnded(String(rpc.id), live);
      deps.metrics.inflight--;
      if (live.record.errorCode === "gw.client.disconnected") deps.metrics.disconnects.inc();
      if (live.record.errorCode === "gw.request.aborted") deps.metrics.aborts.inc();
      deps.pending.delete(ended);
      settle();
    }
  };
  return { requestId: id, run, gone: onClientGone };
}

/**
 * A priced tool's billing (`mcp_servers[].prices`): the hop the server answered costs the price,
 * a failed one nothing; the key's meter and its session's budget count it as a model call's
 * cost (docs/mcp.md "History and metrics").
 */
function toolBilling(
  price: number,
  opts: { config: Config; keyId: string | null; live: LiveRequest; deps: McpDeps },
): Billing {
  const { keyId, deps } = opts;
  const key = configKey(opts.config, keyId);
  // Metered only for a key with a budget, which is all a tool's price counts against.
  const meter = key?.budget && deps.keyMeter ? deps.keyMeter : null;
  const base: Billing = {
    bill: (hop) => {
      if (hop.outcome !== "success") return { costUsd: null, cacheWriteUsd: null };
      if (meter && key) meter.add(key.id, { costUsd: price });
      return { costUsd: price, cacheWriteUsd: null };
    },
  };
  const sessionId = opts.live.record.sessionId;
  const limits = deps.sessionLimits;
  return key?.session_budget && limits && sessionId !== null
    ? limits.billing(base, { keyId: key.id, sessionId })
    : base;
}

function answerOf(id: RpcId, answer: ToolAnswer): RpcResponse {
  return answer.kind === "result"
    ? { jsonrpc: "2.0", id, result: answer.result }
    : { jsonrpc: "2.0", id, error: answer.error };
}

/** The checks, then the call; every refusal is returned, as the call's own errors are. */
async function callTool(
  live: LiveRequest,
  opts: {
    rpc: RpcRequest;
    name: string | null;
    session: McpSession;
    config: Config;
    releases: (() => void)[];
    relay: (n: RpcNotification) => void;
    deps: McpDeps;
  },
): Promise<ToolAnswer | GatewayError> {
  const { rpc, name, session, config, deps } = opts;
  const keyId = session.keyId;
  const params = rpc.params ?? {};
  const split = name === null ? null : splitToolName(name);
  const server = split && serverFor(config, { serverId: split.serverId, keyId });
  if (!split || !server || !keyMayUseTool(config, { keyId, name: name! })) {
    // A tool the key may not use is answered as one that does not exist (docs/mcp.md).
    return new GatewayError(`unknown tool '${name ?? ""}'; tools/list lists them`, {
      code: "gw.mcp.unknown_tool",
    });
  }
  if (params.arguments !== undefined && !isRecord(params.arguments)) {
    return new GatewayError("tools/call arguments must be an object", {
      code: "gw.client.invalid_request",
    });
  }
  live.routed(`mcp:${server.id}`);
  live.tool({ server: server.id });
  const price = server.prices?.[split.tool];
  if (price !== undefined) live.billWith(toolBilling(price, { config, keyId, live, deps }));
  const key = configKey(config, keyId);
  if (key) {
    const taken = keyInFlight(deps).take(key);
    if (taken instanceof GatewayError) return taken;
    opts.releases.push(taken);
  }
  try {
    const admission = admitKey(config, { keyId, meter: deps.keyMeter, now: deps.clock.now });
    if (admission) await admission;
    const limits = deps.sessionLimits;
    if (limits && SessionLimits.applies(key) && live.record.sessionId !== null) {
      // The loop breaker sees the tool and its arguments as the model path sees a body.
      const text = JSON.stringify([name, params.arguments ?? null]);
      await limits.admit(key, {
        sessionId: live.record.sessionId,
        bodyDigest: () => bodyDigest(new TextEncoder().encode(text)),
      });
    }
  } catch (err) {
    return GatewayError.from(err);
  }
  const liveness = serverLiveness(server, config);
  if (liveness.totalMs !== null) {
    const reason = callTimeout({
      server: server.id,
      tool: split.tool,
      secs: liveness.totalMs / 1000,
    });
    opts.releases.push(deps.clock.after(liveness.totalMs, () => live.abort(reason)));
  }
  const targets = serverTargets(server, deps.env);
  for (const target of targets) deps.mcp.targets.set(target.label, target);
  const token = isRecord(params._meta) ? params._meta.progressToken : undefined;
  return await runToolCall({
    live,
    session,
    server,
    liveness,
    targets,
    tool: split.tool,
    arguments: params.arguments as Record<string, unknown> | undefined,
    progressToken: typeof token === "string" || typeof token === "number" ? token : undefined,
    relay: opts.relay,
  }, { state: deps.mcp, clock: deps.clock, fetch: deps.fetch, metrics: deps.metrics });
}
