import type { FailureSource } from "./wire_kinds.ts";

/**
 * Every code the gateway emits, with whose fault it is by default and the
 * status it answers with by default (docs/architecture.md "Errors"). A new
 * error is one line here; a site overrides source or status only where the
 * same code means something else there (an idle timeout answers the route's
 * `timeout_status`; a refused route is a config fault).
 */
export const ERROR_CODES = {
  "gw.upstream.idle_timeout": { source: "upstream", status: 504 },
  "gw.upstream.idle_timeout_mid_stream": { source: "upstream", status: 504 },
  "gw.upstream.first_content_timeout": { source: "upstream", status: 504 },
  "gw.upstream.deadline": { source: "timeout", status: 504 },
  "gw.upstream.error": { source: "upstream", status: 502 },
  "gw.upstream.credentials": { source: "upstream", status: 502 },
  "gw.upstream.rate_limited": { source: "upstream", status: 429 },
  "gw.upstream.unreachable": { source: "upstream", status: 502 },
  "gw.upstream.rejected": { source: "client", status: 400 },
  "gw.upstream.bad_response": { source: "upstream", status: 502 },
  "gw.upstream.oversized": { source: "upstream", status: 502 },
  "gw.upstream.incomplete": { source: "upstream", status: 502 },
  "gw.upstream.unavailable": { source: "config", status: 503 },
  "gw.upstream.hedge_lost": { source: "upstream", status: 499 },
  "gw.upstream.replay_diverged": { source: "upstream", status: 502 },
  // An operator's stop, and the fences that keep a stopped session or turn from being re-sent
  // for a while: final, and said per client format in words each coding agent takes as final
  // (gateway/formats/error_vocab.ts, docs/design.md "Abort and disconnect").
  "gw.request.aborted": { source: "aborted", status: 499, final: true },
  "gw.session.fenced": { source: "aborted", status: 499, final: true },
  "gw.turn.fenced": { source: "aborted", status: 499, final: true },
  "gw.client.disconnected": { source: "client", status: 499 },
  "gw.client.invalid_json": { source: "client", status: 400 },
  "gw.client.invalid_request": { source: "client", status: 400 },
  "gw.client.unknown_model": { source: "client", status: 404 },
  "gw.client.body_too_large": { source: "client", status: 413 },
  "gw.client.body_timeout": { source: "client", status: 408 },
  "gw.client.unauthorized": { source: "client", status: 401 },
  "gw.client.forbidden": { source: "client", status: 403 },
  "gw.client.not_found": { source: "client", status: 404 },
  "gw.client.method_not_allowed": { source: "client", status: 405 },
  "gw.client.duplicate_request_id": { source: "client", status: 409 },
  "gw.client.unsupported": { source: "client", status: 400 },
  "gw.client.unsupported_media_type": { source: "client", status: 415 },
  "gw.client.host_not_allowed": { source: "client", status: 403 },
  "gw.client.bad_host": { source: "client", status: 400 },
  "gw.client.cross_site": { source: "client", status: 403 },
  "gw.client.unknown_interaction": { source: "client", status: 404 },
  "gw.client.interaction_elsewhere": { source: "client", status: 400 },
  "gw.upstream.interaction_home_unavailable": { source: "config", status: 503 },
  "gw.gateway.interaction_lookup_failed": { source: "gateway", status: 503 },
  "gw.client.unknown_continuation": { source: "client", status: 404 },
  "gw.gateway.continuation_lookup_failed": { source: "gateway", status: 503 },
  "gw.slots.full": { source: "gateway", status: 429 },
  "gw.key.rate_limited": { source: "client", status: 429 },
  "gw.key.budget_exhausted": { source: "client", status: 429 },
  "gw.key.max_in_flight": { source: "client", status: 429 },
  // The process's budget of embedding vectors in memory is taken (docs/security.md).
  "gw.embeddings.memory_full": { source: "gateway", status: 429 },
  // A retry cannot help a spent session or a loop: answered with `x-should-retry: false`.
  "gw.session.budget_exhausted": { source: "client", status: 429, final: true },
  "gw.session.loop_detected": { source: "client", status: 429, final: true },
  // Tool servers on /mcp (docs/mcp.md). A call that was sent and then lost, to a tool not
  // annotated read-only or idempotent, is never sent again: the caller is told it may have run.
  "gw.mcp.tool_may_have_run": { source: "upstream", status: 504 },
  "gw.mcp.call_timeout": { source: "timeout", status: 504 },
  "gw.mcp.unknown_tool": { source: "client", status: 404 },
  "gw.mcp.unknown_session": { source: "client", status: 404 },
  "gw.mcp.sessions_full": { source: "gateway", status: 503 },
  "gw.mcp.cancelled": { source: "client", status: 499 },
  "gw.mcp.oversized": { source: "upstream", status: 502 },
  "gw.mcp.flood": { source: "upstream", status: 502 },
  "gw.mcp.malformed": { source: "upstream", status: 502 },
  "gw.gateway.internal": { source: "gateway", status: 500 },
  "gw.gateway.interrupted": { source: "gateway", status: 500 },
  "gw.gateway.shutting_down": { source: "gateway", status: 503 },
  "gw.gateway.too_many_connections": { source: "gateway", status: 503 },
  "config.invalid": { source: "config", status: 503 },
  "guardrail.blocked": { source: "client", status: 400 },
  "guardrail.unchecked": { source: "client", status: 400 },
  "control.request_not_running": { source: "client", status: 404 },
  "control.session_not_running": { source: "client", status: 404 },
} as const satisfies Record<string, { source: FailureSource; status: number; final?: true }>;

/**
 * Whether a client should not retry the request at all (`x-should-retry: false`, which the
 * OpenAI and Anthropic SDKs obey): the `final` column of ERROR_CODES.
 */
export function isFinal(code: GatewayCode): boolean {
  return "final" in ERROR_CODES[code];
}

/** Codes the gateway emits; the first segment says whose fault it is. */
export type GatewayCode = keyof typeof ERROR_CODES;
