import type { AttemptRecord, AttemptTrace, RequestRecord } from "../../db/records.ts";
import type { Upstream } from "../config/schema.ts";
import type { UpstreamKind } from "../formats/format.ts";
import { formatTraceparent } from "../live/trace_context.ts";
import { boundedMemo } from "../runtime/memo.ts";
import { azureOf } from "../formats/cloud/azure.ts";
import { vertexOf } from "../formats/cloud/vertex.ts";

/** `gen_ai.provider.name` of each upstream kind (OpenTelemetry GenAI conventions). */
const PROVIDERS: Record<UpstreamKind, string> = {
  "openai-chat": "openai",
  "openai-responses": "openai",
  anthropic: "anthropic",
  gemini: "gcp.gemini",
  bedrock: "aws.bedrock",
  "gemini-interactions": "gcp.gemini",
};

/** The conventions' names for the clouds serving a kind's API (docs/providers.md). */
function providerName(upstream: Upstream): string {
  if (azureOf(upstream)) return "azure.ai.openai";
  if (vertexOf(upstream)) return "gcp.vertex_ai";
  return PROVIDERS[upstream.kind];
}

const DEFAULT_PORTS: Record<string, number> = { "http:": 80, "https:": 443 };

interface Server {
  address: string;
  port: number | undefined;
}

/**
 * Per scheme and authority: an upstream's calls all go to the same one, so it is parsed once
 * (bounded: upstreams are few, but a url may carry a per-call part in its authority).
 */
const serverAt = boundedMemo((origin: string): Server => {
  const parsed = new URL(origin);
  return {
    address: parsed.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: parsed.port ? Number(parsed.port) : DEFAULT_PORTS[parsed.protocol],
  };
}, { max: 256 });

/** The span's `server.address` and `server.port` of a call to `url`. */
function serverOf(url: string): Server {
  // Up to the path: it holds the whole authority (no "/" in there), and more is only a longer key.
  const end = url.indexOf("/", url.indexOf("//") + 2);
  return serverAt(end < 0 ? url : url.slice(0, end));
}

/** The parts of a hop (gateway/forward/hop.ts) the hook reads. */
export interface TracedHop {
  req: { live: { record: Readonly<RequestRecord> } };
  attempt: { record: Readonly<AttemptRecord> };
  upstream: Upstream;
}

/**
 * The trace hook of one upstream call, run once its request is built: the
 * call carries the trace context, and the answer is the attempt's span trace: its span id and
 * where the call went (the hop appends it to its row: live_request.ts). A recorded trace names the
 * attempt's span as the parent; otherwise the client's own `traceparent` (if any) goes on
 * unchanged, so an upstream that traces never points at a span no one exported.
 */
export function traceUpstream(
  request: Pick<Request, "url" | "headers">,
  hop: TracedHop,
): AttemptTrace | null {
  const { trace } = hop.req.live.record;
  const attempt = hop.attempt.record;
  if (!attempt.trace) return null;
  const server = serverOf(request.url);
  const span = {
    spanId: attempt.trace.spanId,
    provider: providerName(hop.upstream),
    serverAddress: server.address,
    serverPort: server.port,
  };
  if (!trace) return span;
  if (trace.recorded) {
    request.headers.set("traceparent", formatTraceparent(trace, attempt.trace.spanId));
  } else if (trace.parentSpanId) {
    request.headers.set("traceparent", formatTraceparent(trace, trace.parentSpanId));
  } else {
    return span;
  }
  if (trace.traceState) request.headers.set("tracestate", trace.traceState);
  return span;
}
