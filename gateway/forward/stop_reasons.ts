import { GatewayError } from "../runtime/gateway_error.ts";

/**
 * The reasons a request or a hop is stopped from our side. They travel as
 * AbortSignal reasons, so whoever catches the abort knows why without flags.
 */
export function abortedByOperator(opts: { session?: boolean } = {}): GatewayError {
  // Said to the caller as final, in words each coding agent does not retry (docs/design.md
  // "Abort and disconnect"): the message is what its user reads.
  const message = opts.session
    ? "request aborted by an operator, who stopped this session"
    : "request aborted by an operator";
  return new GatewayError(message, {
    code: "gw.request.aborted",
    source: "aborted",
    status: 499,
  });
}

export function clientDisconnected(): GatewayError {
  return new GatewayError("client disconnected", {
    code: "gw.client.disconnected",
    source: "client",
    status: 499,
  });
}

export function shuttingDown(): GatewayError {
  return new GatewayError("gateway is shutting down", {
    code: "gw.gateway.shutting_down",
    source: "gateway",
    status: 503,
  });
}

export function idleTimeout(
  upstream: string,
  opts: { secs: number; midStream: boolean; timeoutStatus: number },
): GatewayError {
  const said = opts.midStream ? "stopped sending" : "sent no content";
  return new GatewayError(`upstream ${upstream} ${said} for ${opts.secs}s`, {
    code: opts.midStream ? "gw.upstream.idle_timeout_mid_stream" : "gw.upstream.idle_timeout",
    source: "upstream",
    status: opts.timeoutStatus,
  });
}

export function deadlineExceeded(
  upstream: string,
  opts: { secs: number; timeoutStatus: number },
): GatewayError {
  return new GatewayError(
    `upstream ${upstream} did not finish the whole answer within ${opts.secs}s; ` +
      "retry with stream: true or a lower max_tokens",
    { code: "gw.upstream.deadline", source: "timeout", status: opts.timeoutStatus },
  );
}

/** The GatewayError a signal was aborted with, if it was one of ours. */
export function stopReason(signal: AbortSignal): GatewayError | undefined {
  return signal.aborted && signal.reason instanceof GatewayError ? signal.reason : undefined;
}
