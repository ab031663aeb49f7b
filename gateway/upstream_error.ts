import { GatewayError } from "./gateway_error.ts";
import { isRecord, parseJson } from "./json.ts";

/** What a provider's error body says, as each format module reads it. */
export interface UpstreamErrorBody {
  message: string;
  type?: string;
}

/**
 * Reads the common shapes of provider error bodies: `{error: {message, type}}`
 * (OpenAI, Anthropic, Gemini) and `{message}` (Bedrock).
 */
export function readErrorBody(text: string): UpstreamErrorBody | undefined {
  const body = parseJson(text);
  if (!isRecord(body)) return undefined;
  const inner = isRecord(body.error) ? body.error : body;
  const message = typeof inner.message === "string" ? inner.message : undefined;
  if (message === undefined) return undefined;
  const type = typeof inner.type === "string"
    ? inner.type
    : typeof inner.status === "string"
    ? inner.status
    : typeof body.__type === "string"
    ? body.__type
    : undefined;
  return { message, type };
}

/**
 * Turns an upstream's error status into the gateway's error, deciding whose
 * fault it is: 401/403 is our credential, 429 and 5xx are the upstream's,
 * any other 4xx is the caller's and is passed on with its status.
 */
export function upstreamStatusError(
  status: number,
  opts: { body?: string; retryAfterSecs?: number } = {},
): GatewayError {
  const parsed = opts.body === undefined ? undefined : readErrorBody(opts.body);
  const detail = parsed?.message ?? (opts.body?.trim().slice(0, 200) || `HTTP ${status}`);
  if (status === 401 || status === 403) {
    return new GatewayError(`upstream refused the gateway's credentials: ${detail}`, {
      code: "gw.upstream.credentials",
      source: "upstream",
      status: 502,
      upstreamType: parsed?.type,
    });
  }
  if (status === 429) {
    return new GatewayError(`upstream rate limit: ${detail}`, {
      code: "gw.upstream.rate_limited",
      source: "upstream",
      status: 429,
      retryAfterSecs: opts.retryAfterSecs,
      upstreamType: parsed?.type,
    });
  }
  if (status >= 400 && status < 500 && status !== 408) {
    return new GatewayError(detail, {
      code: "gw.upstream.rejected",
      source: "client",
      status,
      upstreamType: parsed?.type,
    });
  }
  return new GatewayError(`upstream error ${status}: ${detail}`, {
    code: "gw.upstream.error",
    source: "upstream",
    status: 502,
    upstreamType: parsed?.type,
  });
}

/** An upstream answer the gateway cannot read: the upstream's fault. */
export function badResponse(message: string): GatewayError {
  return new GatewayError(message, {
    code: "gw.upstream.bad_response",
    source: "upstream",
    status: 502,
  });
}

/** The statuses SPEC §6 retries on the same candidate before failing over. */
export function isRetryableStatus(status: number): boolean {
  // 529 is Anthropic's "overloaded".
  return [429, 500, 502, 503, 504, 529].includes(status);
}

/** Retry-After in seconds, from either the delta or the HTTP-date form. */
export function retryAfterSecs(header: string | null, now: number): number | undefined {
  if (!header) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs)) return Math.max(0, secs);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}
