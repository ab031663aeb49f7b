import type { UpstreamKind } from "./format.ts";
import { GatewayError, type GatewayErrorInit } from "../runtime/gateway_error.ts";
import { isRecord, parseJson } from "../runtime/json.ts";
import { UPSTREAM_CAPS } from "./upstream_caps.ts";
import { SORT_CODES, sortStatus } from "./upstream_status.ts";

/** What a provider's error body says, as each format module reads it. */
export interface UpstreamErrorBody {
  message: string;
  /** OpenAI `type`, Anthropic `type`, Gemini `status` or Bedrock `__type`. */
  type?: string;
  /** OpenAI's `code` (a string; Gemini's numeric `code` is only the HTTP status). */
  code?: string;
  /** The request field at fault: OpenAI `param`, or a Gemini BadRequest field violation. */
  param?: string;
}

/**
 * Reads the common shapes of provider error bodies: `{error: {message, type,
 * code, param}}` (OpenAI), `{type: "error", error: {type, message}}`
 * (Anthropic), `{error: {code, message, status, details}}` (Gemini, also as
 * an array of one) and `{message}` (Bedrock).
 */
export function readErrorBody(text: string): UpstreamErrorBody | undefined {
  const parsed = parseJson(text);
  // Google's streaming methods may answer an error as a JSON array of one.
  const body = Array.isArray(parsed) && parsed.length === 1 ? parsed[0] : parsed;
  if (!isRecord(body)) return undefined;
  const inner = isRecord(body.error) ? body.error : body;
  const message = stringOf(inner.message);
  if (message === undefined) return undefined;
  const type = stringOf(inner.type) ?? stringOf(inner.status) ?? stringOf(body.__type);
  const param = stringOf(inner.param) ?? violatedField(inner.details);
  return { message, type, code: stringOf(inner.code), param };
}

/** The first field a google.rpc.BadRequest detail names. */
function violatedField(details: unknown): string | undefined {
  if (!Array.isArray(details)) return undefined;
  for (const detail of details) {
    const violations = isRecord(detail) ? detail.fieldViolations : undefined;
    const first = Array.isArray(violations) ? violations[0] : undefined;
    const field = isRecord(first) ? stringOf(first.field) : undefined;
    if (field) return field;
  }
  return undefined;
}

function stringOf(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/**
 * Turns an upstream's error status into the gateway's error, sorted once (upstream_status.ts):
 * 401/403 is our credential, 408, 429 and 5xx are the upstream's, any other 4xx is the caller's
 * and is passed on with its status. The error keeps its sort for the verdict table. `kind`
 * names the vocabulary of the body's words; `headers`, given for an HTTP error answer (not an
 * error inside a stream), keeps that answer so a client of the same format gets it unchanged.
 */
export function upstreamStatusError(
  status: number,
  opts: { body?: string; retryAfterSecs?: number; kind?: UpstreamKind; headers?: Headers } = {},
): GatewayError {
  const parsed = opts.body === undefined ? undefined : readErrorBody(opts.body);
  const detail = parsed?.message ?? (opts.body?.trim().slice(0, 200) || `HTTP ${status}`);
  const sort = sortStatus(status);
  const words: Partial<GatewayErrorInit> = {
    upstreamType: parsed?.type,
    upstreamCode: parsed?.code,
    upstreamKind: opts.kind,
    statusSort: sort,
  };
  const code = SORT_CODES[sort];
  if (sort === "credentials") {
    return new GatewayError(`upstream refused the gateway's credentials: ${detail}`, {
      code,
      ...words,
    });
  }
  if (sort === "rate_limit") {
    return new GatewayError(`upstream rate limit: ${detail}`, {
      code,
      retryAfterSecs: opts.retryAfterSecs,
      ...words,
    });
  }
  if (sort === "callers") {
    // A body cut at the cap is no longer the upstream's answer: the client gets ours instead.
    const answer = opts.headers && opts.body !== undefined && !cutAtCap(opts.body)
      ? {
        text: opts.body,
        contentType: opts.headers.get("content-type") ?? "application/json",
      }
      : undefined;
    return new GatewayError(detail, {
      code,
      status,
      param: parsed?.param,
      upstreamAnswer: answer,
      ...words,
    });
  }
  return new GatewayError(`upstream error ${status}: ${detail}`, { code, ...words });
}

/** Whether an error body filled its cap (so was likely cut): a cut character re-encodes larger. */
function cutAtCap(body: string): boolean {
  return body.length * 3 >= UPSTREAM_CAPS.errorBodyBytes &&
    new TextEncoder().encode(body).byteLength >= UPSTREAM_CAPS.errorBodyBytes;
}

/** An upstream answer the gateway cannot read: the upstream's fault. */
export function badResponse(message: string): GatewayError {
  return new GatewayError(message, {
    code: "gw.upstream.bad_response",
  });
}

/** Retry-After in seconds, from either the delta or the HTTP-date form. */
export function retryAfterSecs(header: string | null, now: number): number | undefined {
  if (!header) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs)) return Math.max(0, secs);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}
