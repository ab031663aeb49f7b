import type { McpServer } from "../config/mcp_schema.ts";
import type { AttemptOutcome } from "../../db/records.ts";
import type { LiveRequest } from "../live/live_request.ts";
import type { ProbeTicket } from "../route/cooldown.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { RPC, type RpcErrorBody, type RpcId, type RpcNotification } from "./json_rpc.ts";
import type { McpSession, ServerSession } from "./mcp_sessions.ts";
import type { McpState } from "./mcp_state.ts";
import { mayHaveRun, toolIdle } from "./mcp_stops.ts";
import { gatewayRpcId, type ServerCallDeps } from "./server_requests.ts";
import type { ServerLiveness } from "./server_targets.ts";
import {
  malformed,
  postMessage,
  sendAndForget,
  type ServerTarget,
  type WireAnswer,
  WireFailure,
} from "./server_wire.ts";

/** One `tools/call` a client sent, resolved to its server (docs/mcp.md "Tool calls: liveness and failover"). */
export interface ToolCall {
  live: LiveRequest;
  session: McpSession;
  server: McpServer;
  liveness: ServerLiveness;
  targets: ServerTarget[];
  /** The tool's own name on its server (the client's name without `<server id>__`). */
  tool: string;
  arguments: Record<string, unknown> | undefined;
  /** The client's progress token: progress notifications carrying it are relayed. */
  progressToken: RpcId | undefined;
  /** Passes a progress notification on to the client. */
  relay: (notification: RpcNotification) => void;
}

export interface ToolCallDeps {
  state: McpState;
  clock: Clock;
  fetch: typeof fetch;
  metrics: Metrics;
}

/** The server's answer: its result, or its own JSON-RPC error, passed on as they are. */
export type ToolAnswer =
  | { kind: "result"; result: Record<string, unknown>; bytes: number }
  | { kind: "server_error"; error: RpcErrorBody; bytes: number };

type HopEnd =
  | { kind: "answer"; answer: ToolAnswer }
  | { kind: "failed"; error: GatewayError; sent: boolean }
  | { kind: "stopped"; error: GatewayError };

/**
 * A tool call over the server's replicas in order, each passed over while paused (cooldown),
 * probed once its pause ends (half-open), or skipped at its `max_in_flight`. A replica that
 * fails is charged to its cooldown; the call moves to the next one only where it cannot run
 * the tool twice: before the call was sent, or for a tool its server annotated read-only or
 * idempotent (docs/mcp.md "Tool calls: liveness and failover"). Otherwise the caller is told the tool may have run.
 */
export async function runToolCall(
  call: ToolCall,
  deps: ToolCallDeps,
): Promise<ToolAnswer | GatewayError> {
  const { live, server } = call;
  const cooldowns = deps.state.cooldowns(server);
  const tried: string[] = [];
  let last: GatewayError | null = null;
  for (const target of call.targets) {
    if (live.signal.aborted) break;
    if (deps.state.inFlight(target.label) >= server.max_in_flight) continue;
    const probe = await cooldowns.claimProbe(target.label, { leaseMs: call.liveness.idleMs });
    if (probe === "taken") continue;
    const ticket: ProbeTicket | null = probe === "open" ? null : probe;
    const release = deps.state.take(target.label);
    tried.push(target.label);
    let end: HopEnd;
    try {
      end = await oneHop(call, { target, deps });
    } finally {
      release();
    }
    if (end.kind === "answer") {
      cooldowns.success(target.label);
      if (ticket) deps.metrics.probes.inc({ upstream: target.label, result: "ok" });
      return end.answer;
    }
    if (end.kind === "stopped") {
      if (ticket) cooldowns.probeEnded(ticket);
      return end.error;
    }
    cooldowns.failure(target.label, end.error.code);
    if (ticket) deps.metrics.probes.inc({ upstream: target.label, result: "failed" });
    last = withTried(end.error, tried);
    const repeatable = deps.state.hints(server.id, call.tool)?.repeatable ?? false;
    if (end.sent && !repeatable) return mayHaveRun(last, { server: server.id, tool: call.tool });
  }
  const stop = live.signal.aborted ? live.signal.reason : undefined;
  if (stop instanceof GatewayError) return stop;
  return last ?? new GatewayError(
    `every replica of tool server ${server.id} is paused or busy; try again shortly`,
    { code: "gw.upstream.unavailable", tried, retryAfterSecs: 1 },
  );
}

function withTried(err: GatewayError, tried: string[]): GatewayError {
  return new GatewayError(err.message, { code: err.code, tried: [...tried], cause: err });
}

/** One replica's try: its server session, the POST, and its answer read with the idle timer. */
async function oneHop(
  call: ToolCall,
  opts: { target: ServerTarget; deps: ToolCallDeps },
): Promise<HopEnd> {
  const { live, liveness, server } = call;
  const { target, deps } = opts;
  const attempt = live.startAttempt(target.label, call.tool);
  const stop = new AbortController();
  const onStop = () => stop.abort(live.signal.reason);
  live.signal.addEventListener("abort", onStop);
  if (live.signal.aborted) onStop();
  let disarm = () => {};
  // Restarted only by content: a progress notification or the result (docs/liveness.md).
  const armIdle = () => {
    disarm();
    disarm = deps.clock.after(liveness.idleMs, () => {
      stop.abort(toolIdle({ label: target.label, secs: liveness.idleMs / 1000 }));
    });
  };
  armIdle();
  const callDeps: ServerCallDeps = {
    clock: deps.clock,
    fetch: deps.fetch,
    maxBytes: server.max_result_bytes,
    maxNotifications: server.max_notifications,
    timeoutMs: liveness.idleMs,
    signal: stop.signal,
  };
  const id = gatewayRpcId();
  const params: Record<string, unknown> = { name: call.tool };
  if (call.arguments !== undefined) params.arguments = call.arguments;
  if (call.progressToken !== undefined) params._meta = { progressToken: call.progressToken };
  const body = { jsonrpc: "2.0", id, method: "tools/call", params };
  let phase: "opening" | "posting" | "sent" = "opening";
  let session: ServerSession | null = null;
  try {
    session = await untilStopped(
      deps.state.serverSession(call.session, { target, deps: callDeps }),
      stop.signal,
    );
    phase = "posting";
    let answer: WireAnswer;
    try {
      answer = await post(target, { body, session, stop, server, fetch: deps.fetch });
    } catch (err) {
      // A server session the server no longer knows (spec: 404): opened again, sent once more.
      if (!(err instanceof WireFailure) || err.opts.status !== 404 || !session.sessionId) throw err;
      deps.state.forget(call.session, target.label);
      phase = "opening";
      session = await untilStopped(
        deps.state.serverSession(call.session, { target, deps: callDeps }),
        stop.signal,
      );
      phase = "posting";
      answer = await post(target, { body, session, stop, server, fetch: deps.fetch });
    }
    phase = "sent";
    attempt.headers(answer.status);
    let notifications = 0;
    for await (const frame of answer.frames) {
      if (frame.kind === "keepalive") continue;
      const { message } = frame;
      if (message.kind === "response") {
        if (message.message.id !== id) continue;
        attempt.firstContent();
        const { result, error } = message.message;
        const toolAnswer: ToolAnswer = result
          ? { kind: "result", result, bytes: frame.bytes }
          : { kind: "server_error", error: error!, bytes: frame.bytes };
        attempt.end("success");
        return { kind: "answer", answer: toolAnswer };
      }
      if (++notifications > server.max_notifications) {
        throw new GatewayError(
          `tool server ${target.label} sent over ${server.max_notifications} messages during ` +
            "one tool call",
          { code: "gw.mcp.flood" },
        );
      }
      if (message.kind === "request") {
        answerServerRequest(target, { request: message.message, session, deps });
        continue;
      }
      const progress = message.message;
      if (
        progress.method === "notifications/progress" && call.progressToken !== undefined &&
        progress.params?.progressToken === call.progressToken
      ) {
        armIdle();
        attempt.firstContent();
        call.relay(progress);
      }
    }
    throw malformed(target.label, "no result: its stream ended first");
  } catch (err) {
    const reason = live.signal.aborted ? live.signal.reason : undefined;
    const sent = phase === "sent" || (phase === "posting" && sentBy(err));
    if (sent) call.session.track(cancelUpstream(target, { id, session, deps, reason }));
    if (reason instanceof GatewayError) {
      attempt.end(outcomeOfStop(reason), reason);
      return { kind: "stopped", error: reason };
    }
    const error = stop.signal.aborted && stop.signal.reason instanceof GatewayError
      ? stop.signal.reason
      : err instanceof WireFailure
      ? err.error
      : GatewayError.from(err);
    attempt.end(error.code === "gw.upstream.idle_timeout" ? "idle_timeout" : "error", error);
    if (["gw.mcp.flood", "gw.mcp.malformed", "gw.mcp.oversized"].includes(error.code)) {
      deps.metrics.mcpServerCut.inc({ server: server.id, reason: error.code.slice(7) });
    }
    return { kind: "failed", error, sent };
  } finally {
    disarm();
    live.signal.removeEventListener("abort", onStop);
    // Closes the stream whatever it still holds.
    if (!stop.signal.aborted) stop.abort();
  }
}

function post(
  target: ServerTarget,
  opts: {
    body: unknown;
    session: ServerSession;
    stop: AbortController;
    server: McpServer;
    fetch: typeof fetch;
  },
): Promise<WireAnswer> {
  return postMessage(target, {
    body: opts.body,
    sessionId: opts.session.sessionId,
    protocolVersion: opts.session.protocolVersion,
    signal: opts.stop.signal,
    fetch: opts.fetch,
    maxBytes: opts.server.max_result_bytes,
  });
}

/** `work`, or the signal's reason once it is aborted, whichever comes first. */
function untilStopped<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function sentBy(err: unknown): boolean {
  return err instanceof WireFailure ? err.opts.sent : true;
}

function outcomeOfStop(reason: GatewayError): AttemptOutcome {
  if (reason.code === "gw.request.aborted") return "aborted";
  if (reason.code === "gw.client.disconnected" || reason.code === "gw.mcp.cancelled") {
    return "client_disconnected";
  }
  return "error";
}

/**
 * `notifications/cancelled` for a call the gateway gave up on (spec "Cancellation"): the
 * server may stop the tool. Sent on its own connection, with its own bound on waiting.
 */
function cancelUpstream(
  target: ServerTarget,
  opts: { id: string; session: ServerSession | null; deps: ToolCallDeps; reason: unknown },
): Promise<void> {
  const { deps } = opts;
  const reason = opts.reason instanceof Error ? opts.reason.message : "the gateway gave up";
  const stop = new AbortController();
  const disarm = deps.clock.after(10_000, () => stop.abort());
  return sendAndForget(target, {
    body: {
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: opts.id, reason: reason.slice(0, 200) },
    },
    sessionId: opts.session?.sessionId ?? null,
    protocolVersion: opts.session?.protocolVersion,
    fetch: deps.fetch,
    signal: stop.signal,
  }).finally(disarm);
}

/**
 * A server's request during a call: a ping is answered (it is no content: the idle timer runs
 * on); sampling, elicitation and roots are not relayed to the client (docs/mcp.md
 * "Not supported, and why"), so they are refused at once rather than left to hang the tool.
 */
function answerServerRequest(
  target: ServerTarget,
  opts: {
    request: { id: RpcId; method: string };
    session: ServerSession | null;
    deps: ToolCallDeps;
  },
): void {
  const { request, deps } = opts;
  const body = request.method === "ping" ? { jsonrpc: "2.0", id: request.id, result: {} } : {
    jsonrpc: "2.0",
    id: request.id,
    error: { code: RPC.methodNotFound, message: "the gateway does not relay this request" },
  };
  const stop = new AbortController();
  const disarm = deps.clock.after(10_000, () => stop.abort());
  sendAndForget(target, {
    body,
    sessionId: opts.session?.sessionId ?? null,
    protocolVersion: opts.session?.protocolVersion,
    fetch: deps.fetch,
    signal: stop.signal,
  }).finally(disarm);
}
