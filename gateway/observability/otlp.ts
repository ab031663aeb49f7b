import type { FinishedRecord } from "./exporter.ts";

type AnyValue = { stringValue: string } | { intValue: string } | { boolValue: boolean };
export type AttributeValue = string | number | boolean | null;

/** An OTLP JSON AnyValue; numbers are integers (token counts, milliseconds, statuses). */
export function value(v: string | number | boolean): AnyValue {
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return { intValue: String(Math.round(v)) };
  return { stringValue: v };
}

/** Who sends: the same resource on logs and traces. */
export const RESOURCE = { attributes: [{ key: "service.name", value: value("pulsegate") }] };

/** Finished requests as an OTLP/HTTP JSON logs export request, one log record each. */
export function otlpLogs(records: FinishedRecord[]): unknown {
  return {
    resourceLogs: [{
      resource: RESOURCE,
      scopeLogs: [{
        scope: { name: "pulsegate" },
        logRecords: records.map(logRecord),
      }],
    }],
  };
}

function logRecord({ request: r, attempts }: FinishedRecord) {
  const fields: Record<string, AttributeValue> = {
    "pulsegate.request_id": r.id,
    "pulsegate.route": r.route,
    "pulsegate.client_format": r.clientFormat,
    "pulsegate.stream": r.stream,
    "pulsegate.session_id": r.sessionId,
    "pulsegate.key_id": r.keyId,
    "pulsegate.upstream": r.upstream,
    "pulsegate.upstream_model": r.upstreamModel,
    "http.response.status_code": r.status,
    "pulsegate.outcome": r.outcome,
    "pulsegate.failure_source": r.failureSource,
    "pulsegate.error_code": r.errorCode,
    "pulsegate.duration_ms": r.durationMs,
    "pulsegate.first_content_ms": r.firstContentMs,
    "gen_ai.usage.input_tokens": r.inputTokens,
    "gen_ai.usage.output_tokens": r.outputTokens,
    "gen_ai.usage.cache_read.input_tokens": r.cachedTokens,
    "gen_ai.usage.cache_creation.input_tokens": r.cacheWriteTokens,
    "pulsegate.attempts": JSON.stringify(attempts.map((a) => ({
      hop: a.hop,
      upstream: a.upstream,
      model: a.model,
      outcome: a.outcome,
      status: a.status,
      code: a.errorCode,
      duration_ms: a.durationMs,
    }))),
  };
  return {
    timeUnixNano: `${r.endedAt ?? r.startedAt}000000`,
    severityText: r.outcome === "success" ? "INFO" : "ERROR",
    body: value(`request ${r.id} ${r.outcome ?? "ended"} with ${r.status ?? "no status"}`),
    attributes: attributes(fields),
  };
}

/** OTLP attributes, leaving out what is null. */
export function attributes(fields: Record<string, AttributeValue | undefined>) {
  return Object.entries(fields)
    .filter((e): e is [string, string | number | boolean] => e[1] !== null && e[1] !== undefined)
    .map(([key, v]) => ({ key, value: value(v) }));
}
