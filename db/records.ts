import type { FailureSource } from "../gateway/runtime/wire_kinds.ts";
export type { FailureSource };

export type AttemptOutcome =
  | "success"
  | "error"
  | "idle_timeout"
  | "aborted"
  | "client_disconnected"
  | "hedge_lost"
  /** A hop that continued an answer another hop broke off (docs/liveness.md, mid-stream resume). */
  | "resumed"
  /**
   * A replaying hop whose answer was not the one the client already has: held, never relayed
   * (docs/liveness.md, "Replay").
   */
  | "replay_diverged";

/**
 * A request's W3C trace context (docs/observability.md "Traces"). It travels with the record to
 * export destinations and is not stored in history.
 */
export interface RequestTrace {
  traceId: string; // 32 hex
  spanId: string; // 16 hex: the request's own span
  parentSpanId: string | null; // the client's span, from its `traceparent`
  flags: number; // the trace flags passed on (bit 0: sampled)
  traceState: string | null; // the client's `tracestate`, passed on unchanged
  recorded: boolean; // whether a traces destination gets this request's spans
}

/** What an attempt's span needs beyond its row. */
export interface AttemptTrace {
  spanId: string; // chosen when the hop starts, so its upstream call can name it
  provider?: string; // gen_ai.provider.name of the upstream's kind
  serverAddress?: string;
  serverPort?: number;
}

/** A request as it goes to export destinations: its row, plus its trace context. */
export interface RequestRecord extends RequestRow {
  trace?: RequestTrace;
}

/** One hop as it goes to export destinations: its row, plus what its span needs. */
export interface AttemptRecord extends AttemptRow {
  trace?: AttemptTrace;
}

/** A request row. `state` is `open` from the first write until the request ends. */
export interface RequestRow {
  id: string;
  instanceId: string;
  state: "open" | "closed" | "interrupted";
  startedAt: number; // epoch ms
  endedAt: number | null;
  clientFormat: string;
  route: string | null; // the model name the client asked for
  stream: boolean;
  keyId: string | null;
  sessionId: string | null;
  status: number | null; // HTTP status sent (or that would have been sent) to the client
  outcome: "success" | "error" | null;
  failureSource: FailureSource | null;
  errorCode: string | null;
  errorMessage: string | null;
  upstream: string | null; // last upstream picked, null when none was
  upstreamModel: string | null;
  firstContentMs: number | null; // from start to first content sent to the client
  durationMs: number | null;
  /** Every input token, the cache reads and writes included (docs/observability.md "Cache tokens"). */
  inputTokens: number | null;
  outputTokens: number | null;
  /** Input tokens read from the provider's prompt cache (part of `inputTokens`). */
  cachedTokens: number | null;
  reasoningTokens: number | null;
  /** Whether the tokens are partly the gateway's estimate (docs/observability.md "Token usage"). */
  tokensEstimated: boolean;
  /** Where its tokens came from; null when it has none (docs/observability.md "Token usage"). */
  usageSource: UsageSource | null;
  /** USD, the sum over its attempts; null when none of them had a price (docs/config.md). */
  costUsd: number | null;
  /** Input tokens written to the prompt cache, every lifetime (part of `inputTokens`). */
  cacheWriteTokens: number | null;
  /** Of `cacheWriteTokens`, those written for one hour. */
  cacheWrite1hTokens: number | null;
  /** USD of the cache writes, part of `costUsd`, summed over the attempts; null unpriced. */
  cacheWriteUsd: number | null;
  /**
   * The upstream holding the session's warm cache when the request came, when a hop of it went
   * to another one (docs/observability.md "Cache-aware affinity"); null otherwise.
   */
  movedFrom: string | null;
  /**
   * A tool call's (client format `mcp`, docs/mcp.md "History and metrics"): its server's id, and the bytes
   * of the client's message and of what the gateway sent back. Absent (null) on a model call.
   */
  toolServer: string | null;
  bytesIn: number | null;
  bytesOut: number | null;
}

/**
 * Where a row's tokens came from: `upstream`, its own report; `estimated`, partly the gateway's
 * estimate (usage never came, or not after the last text); `rejected`, the upstream reported a
 * count out of range (docs/security.md "Numbers an upstream reports") and the gateway's estimate
 * or cut stands in its place. A request's is its hops': `rejected` when any hop's was.
 */
export type UsageSource = "upstream" | "estimated" | "rejected";

export const USAGE_SOURCES: Readonly<Record<UsageSource, true>> = {
  upstream: true,
  estimated: true,
  rejected: true,
};

/** One hop: one call to one upstream. */
export interface AttemptRow {
  requestId: string;
  hop: number; // 1-based, in order of sending
  upstream: string;
  model: string;
  outcome: AttemptOutcome | null; // null while in progress
  status: number | null; // upstream HTTP status, null when none came
  errorCode: string | null;
  errorMessage: string | null;
  startedAt: number; // epoch ms, when the request was sent
  headersMs: number | null;
  firstContentMs: number | null;
  durationMs: number | null;
  inputTokens: number | null;
  outputTokens: number | null;
  /**
   * True when the upstream's usage never came (or not after the last text) and the
   * tokens are estimated from what was sent and received (docs/observability.md "Token usage").
   */
  tokensEstimated: boolean;
  /** Where its tokens came from; null when it has none (docs/observability.md "Token usage"). */
  usageSource: UsageSource | null;
  /**
   * The client's provider headers and query flags this hop could not be sent
   * because its body was translated (e.g. `anthropic-beta: context-1m-2025-08-07; ?beta=true`);
   * null when nothing was left behind.
   */
  droppedHeaders: string | null;
  /** USD for the tokens this hop billed; null when its upstream lists no price for its model. */
  costUsd: number | null;
  /**
   * A resuming hop: how many characters of text the client already had when it
   * continued the answer (docs/liveness.md); null for every other hop.
   */
  resumeOffset: number | null;
  /** Input tokens read from the prompt cache (part of `inputTokens`). */
  cachedTokens: number | null;
  /** Input tokens written to the prompt cache, every lifetime (part of `inputTokens`). */
  cacheWriteTokens: number | null;
  /** Of `cacheWriteTokens`, those written for one hour. */
  cacheWrite1hTokens: number | null;
  /** USD of this hop's cache writes, part of `costUsd`; null when unpriced. */
  cacheWriteUsd: number | null;
  /**
   * The session's warm upstream, when this hop went to another one (a failover, a full or paused
   * warm upstream, a hedge or a resume): its cache writes are what leaving the warm cache cost.
   */
  movedFrom: string | null;
}
