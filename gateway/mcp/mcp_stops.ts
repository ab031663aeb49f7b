import { GatewayError } from "../runtime/gateway_error.ts";

/**
 * The reasons a tool call is stopped from the gateway's side, as AbortSignal reasons
 * (gateway/forward/stop_reasons.ts holds the ones the model path shares: an operator's abort,
 * a caller leaving).
 */

/** The client ended its MCP session (DELETE), or the session reached its age or idle bound. */
export function sessionEnded(): GatewayError {
  return new GatewayError("the MCP session ended", {
    code: "gw.mcp.cancelled",
    source: "client",
    status: 499,
  });
}

/** The client sent `notifications/cancelled` for the call. */
export function cancelledByClient(reason: unknown): GatewayError {
  const said = typeof reason === "string" ? `: ${reason.slice(0, 200)}` : "";
  return new GatewayError(`the client cancelled the tool call${said}`, {
    code: "gw.mcp.cancelled",
    source: "client",
    status: 499,
  });
}

/** The call's `total_timeout_secs` passed: the server was told to cancel it. */
export function callTimeout(opts: { server: string; tool: string; secs: number }): GatewayError {
  return new GatewayError(
    `tool ${opts.tool} on server ${opts.server} did not finish within ${opts.secs}s; the server ` +
      "was sent notifications/cancelled, and the tool may have run in part",
    { code: "gw.mcp.call_timeout" },
  );
}

/** No content (a progress notification, the result) for the idle timeout. */
export function toolIdle(opts: { label: string; secs: number }): GatewayError {
  return new GatewayError(`tool server ${opts.label} sent nothing for ${opts.secs}s`, {
    code: "gw.upstream.idle_timeout",
  });
}

/**
 * The truthful answer for a call lost after it was sent to a tool that may not run twice
 * (docs/mcp.md "Tool calls: liveness and failover"): it was not sent again, and it may have run.
 */
export function mayHaveRun(
  cause: GatewayError,
  opts: { server: string; tool: string },
): GatewayError {
  return new GatewayError(
    `tool ${opts.tool} on server ${opts.server} may have run: the call was sent and then lost ` +
      `(${cause.message}). It was not sent again, since the tool is not annotated read-only ` +
      "or idempotent; check its effect before calling it again",
    { code: "gw.mcp.tool_may_have_run", tried: cause.tried, cause },
  );
}
