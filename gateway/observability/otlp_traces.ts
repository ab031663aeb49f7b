import type { AttemptRecord, RequestRecord, RequestTrace } from "../../db/records.ts";
import type { FinishedRecord } from "./exporter.ts";
import { attributes, RESOURCE } from "./otlp.ts";

// OTLP enums, as the JSON encoding writes them: numbers.
const KIND_SERVER = 2;
const KIND_CLIENT = 3;
const STATUS_UNSET = 0;
const STATUS_OK = 1;
const STATUS_ERROR = 2;
/** Span flags: bits 0-7 the W3C trace flags; bit 8 "we know whether the parent is remote", bit 9 "it is". */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;
/** The GenAI conventions' operation for every proxied model call. */
const OPERATION = "chat";
/**
 * A tool call through /mcp (docs/mcp.md): the GenAI conventions' tool span, named
 * `execute_tool {gen_ai.tool.name}`, the name as the client called it on the request's span and
 * the server's own on each replica's.
 */
const TOOL_OPERATION = "execute_tool";
const MESSAGE_MAX = 512;

/** What a hop's outcome says about its span; anything else (error, idle_timeout, aborted...) is ERROR. */
const ATTEMPT_STATUS: Record<string, number> = {
  success: STATUS_OK,
  resumed: STATUS_OK,
  // Cancelled on purpose because another hop answered first: not a failure.
  hedge_lost: STATUS_UNSET,
};

/**
 * Finished requests as an OTLP/HTTP JSON traces export request: a SERVER
 * span per request and a CLIENT span per attempt under it, with the
 * OpenTelemetry GenAI attributes and our own `pulsegate.*` ones. Built from the
 * finished rows alone; no prompt or answer text goes in.
 */
export function otlpTraces(records: FinishedRecord[]): unknown {
  return {
    resourceSpans: [{
      resource: RESOURCE,
      scopeSpans: [{ scope: { name: "pulsegate" }, spans: records.flatMap(spansOf) }],
    }],
  };
}

function nanos(ms: number): string {
  return `${Math.max(0, Math.round(ms))}000000`;
}

function spansOf({ request: r, attempts }: FinishedRecord): unknown[] {
  const trace = r.trace;
  if (!trace) return [];
  const end = r.endedAt ?? r.startedAt + (r.durationMs ?? 0);
  const provider = attempts.findLast((a) => a.trace?.provider)?.trace?.provider;
  const failed = r.outcome !== "success";
  const tool = r.clientFormat === "mcp";
  const operation = tool ? TOOL_OPERATION : OPERATION;
  return [
    {
      traceId: trace.traceId,
      spanId: trace.spanId,
      parentSpanId: trace.parentSpanId ?? "",
      ...(trace.traceState ? { traceState: trace.traceState } : {}),
      flags: (trace.flags & 0xff) | HAS_IS_REMOTE | (trace.parentSpanId ? IS_REMOTE : 0),
      name: r.route ? `${operation} ${r.route}` : operation,
      kind: KIND_SERVER,
      startTimeUnixNano: nanos(r.startedAt),
      endTimeUnixNano: nanos(end),
      attributes: [
        ...attributes({
          "gen_ai.operation.name": operation,
          "gen_ai.provider.name": provider,
          "gen_ai.request.model": tool ? null : r.route,
          "gen_ai.response.model": failed || tool ? null : r.upstreamModel,
          "gen_ai.tool.name": tool ? r.route : null,
          "gen_ai.conversation.id": r.sessionId,
          "gen_ai.usage.input_tokens": r.inputTokens,
          "gen_ai.usage.output_tokens": r.outputTokens,
          "gen_ai.usage.cache_read.input_tokens": r.cachedTokens,
          "gen_ai.usage.cache_creation.input_tokens": r.cacheWriteTokens,
          "error.type": failed ? r.errorCode ?? "_OTHER" : null,
          "http.response.status_code": r.status,
          ...requestFields(r),
        }),
        ...costAttribute(r.costUsd),
      ],
      events: firstContent(r.startedAt, r.firstContentMs),
      status: failed
        ? { code: STATUS_ERROR, message: message(r.errorMessage ?? r.errorCode) }
        : { code: STATUS_OK },
    },
    ...attempts.map((a) => attemptSpan(a, { trace, requestEnd: end, tool })),
  ];
}

/** Our own attributes of a request span. */
function requestFields(r: RequestRecord) {
  return {
    "pulsegate.request_id": r.id,
    "pulsegate.route": r.route,
    "pulsegate.client_format": r.clientFormat,
    "pulsegate.stream": r.stream,
    "pulsegate.key_id": r.keyId,
    "pulsegate.session_id": r.sessionId,
    "pulsegate.outcome": r.outcome,
    "pulsegate.failure_source": r.failureSource,
    "pulsegate.error_code": r.errorCode,
    "pulsegate.upstream": r.upstream,
    "pulsegate.upstream_model": r.upstreamModel,
    "pulsegate.first_content_ms": r.firstContentMs,
    "pulsegate.duration_ms": r.durationMs,
    "pulsegate.usage.reasoning_tokens": r.reasoningTokens,
    "pulsegate.usage.cache_creation_1h.input_tokens": r.cacheWrite1hTokens,
    "pulsegate.moved_from": r.movedFrom,
    "pulsegate.tool_server": r.toolServer,
    "pulsegate.bytes_in": r.bytesIn,
    "pulsegate.bytes_out": r.bytesOut,
  };
}

function attemptSpan(
  a: AttemptRecord,
  opts: { trace: RequestTrace; requestEnd: number; tool: boolean },
) {
  const { trace, tool } = opts;
  const operation = tool ? TOOL_OPERATION : OPERATION;
  const status = a.outcome === null ? STATUS_UNSET : ATTEMPT_STATUS[a.outcome] ?? STATUS_ERROR;
  const failed = status === STATUS_ERROR;
  return {
    traceId: trace.traceId,
    spanId: a.trace?.spanId,
    parentSpanId: trace.spanId,
    ...(trace.traceState ? { traceState: trace.traceState } : {}),
    flags: (trace.flags & 0xff) | HAS_IS_REMOTE,
    name: `${operation} ${a.model}`,
    kind: KIND_CLIENT,
    startTimeUnixNano: nanos(a.startedAt),
    endTimeUnixNano: nanos(a.durationMs === null ? opts.requestEnd : a.startedAt + a.durationMs),
    attributes: [
      ...attributes({
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": a.trace?.provider,
        "gen_ai.request.model": tool ? null : a.model,
        "gen_ai.response.model": status === STATUS_OK && !tool ? a.model : null,
        "gen_ai.tool.name": tool ? a.model : null,
        "gen_ai.usage.input_tokens": a.inputTokens,
        "gen_ai.usage.output_tokens": a.outputTokens,
        "gen_ai.usage.cache_read.input_tokens": a.cachedTokens,
        "gen_ai.usage.cache_creation.input_tokens": a.cacheWriteTokens,
        "server.address": a.trace?.serverAddress,
        "server.port": a.trace?.serverPort,
        "error.type": failed ? a.errorCode ?? (a.status ? String(a.status) : "_OTHER") : null,
        "http.response.status_code": a.status,
        "pulsegate.request_id": a.requestId,
        "pulsegate.upstream": a.upstream,
        "pulsegate.hop": a.hop,
        "pulsegate.outcome": a.outcome,
        "pulsegate.error_code": a.errorCode,
        "pulsegate.headers_ms": a.headersMs,
        "pulsegate.first_content_ms": a.firstContentMs,
        "pulsegate.resume_offset": a.resumeOffset,
        "pulsegate.usage.cache_creation_1h.input_tokens": a.cacheWrite1hTokens,
        "pulsegate.moved_from": a.movedFrom,
      }),
      ...costAttribute(a.costUsd),
    ],
    events: [
      ...(a.headersMs === null ? [] : [event("pulsegate.headers", a.startedAt + a.headersMs)]),
      ...firstContent(a.startedAt, a.firstContentMs),
    ],
    status: failed
      ? { code: STATUS_ERROR, message: message(a.errorMessage ?? a.errorCode ?? a.outcome) }
      : { code: status },
  };
}

/** USD is fractional: a double, where every other number here is an integer. */
function costAttribute(usd: number | null) {
  return usd === null ? [] : [{ key: "pulsegate.cost_usd", value: { doubleValue: usd } }];
}

function event(name: string, atMs: number) {
  return { name, timeUnixNano: nanos(atMs) };
}

function firstContent(startedAt: number, firstContentMs: number | null) {
  return firstContentMs === null
    ? []
    : [event("pulsegate.first_content", startedAt + firstContentMs)];
}

function message(text: string | null): string {
  return (text ?? "failed").slice(0, MESSAGE_MAX);
}
