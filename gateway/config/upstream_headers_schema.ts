/**
 * `upstreams[].headers`: headers the operator adds to every call to one upstream (OpenRouter's
 * `HTTP-Referer` and `X-Title`, a tenant header of a proxy in front of a self-hosted server).
 * A value is literal text, or `{"env": "NAME"}` for a secret read from the environment at each
 * call. They never replace what the gateway itself sends (docs/providers.md "Extra headers").
 */
import { z } from "zod";
import { envNameField } from "./env_names.ts";

/**
 * Names the gateway owns, matched case-blind: credentials (ours and each provider's), what
 * belongs to one connection or one body, SigV4's signed headers, the trace context the gateway
 * puts on each call, and its own `x-pulsegate-*`. An operator's header of one of these names
 * could send our credential somewhere else, forge a signature or break the framing.
 */
export const GATEWAY_OWNED_HEADERS: readonly string[] = [
  "authorization",
  "proxy-authorization",
  "x-api-key",
  "api-key",
  "x-goog-api-key",
  "cookie",
  "host",
  "content-length",
  "content-type",
  "content-encoding",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "expect",
  "x-request-id",
  "x-session-id",
  "traceparent",
  "tracestate",
];
const OWNED_PREFIXES = ["x-pulsegate-", "x-amz-"];

/** At most this many extra headers per upstream, each value at most this long. */
export const MAX_UPSTREAM_HEADERS = 32;
export const MAX_HEADER_VALUE_CHARS = 4096;

/** An HTTP field value the runtime accepts as it is: visible ASCII, spaces and tabs. */
export const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

export function isGatewayOwnedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return GATEWAY_OWNED_HEADERS.includes(lower) ||
    OWNED_PREFIXES.some((prefix) => lower.startsWith(prefix));
}

const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;

/** Why a header name is refused, or null; checked on the record so the problem names the key. */
function headerNameProblem(name: string): string | null {
  if (!HEADER_NAME.test(name)) {
    return "must be an HTTP header name (1-64 letters, digits and !#$%&'*+.^_`|~-)";
  }
  if (isGatewayOwnedHeader(name)) {
    return "is a header the gateway sets itself (auth, framing, tracing): it cannot be replaced";
  }
  return null;
}

const literalValue = z.string()
  .max(MAX_HEADER_VALUE_CHARS, { error: `must be at most ${MAX_HEADER_VALUE_CHARS} characters` })
  .regex(HEADER_VALUE, { error: "must be printable ASCII (no line breaks)" });

const envValue = z.object({
  env: envNameField().describe("Name of the env var holding the header's value (a secret)."),
}).strict();

export const upstreamHeadersField = () =>
  z.record(z.string(), z.union([literalValue, envValue]))
    .superRefine((headers, ctx) => {
      const names = Object.keys(headers);
      if (names.length > MAX_UPSTREAM_HEADERS) {
        ctx.addIssue({
          code: "custom",
          message: `must list at most ${MAX_UPSTREAM_HEADERS} headers`,
        });
      }
      const seen = new Set<string>();
      for (const name of names.slice(0, MAX_UPSTREAM_HEADERS + 1)) {
        const problem = headerNameProblem(name);
        if (problem) ctx.addIssue({ code: "custom", path: [name], message: problem });
        // Header names are case-blind: two spellings of one would send only the last.
        else if (seen.has(name.toLowerCase())) {
          ctx.addIssue({
            code: "custom",
            path: [name],
            message: "is listed twice (names are case-blind)",
          });
        }
        seen.add(name.toLowerCase());
      }
    })
    .optional()
    .describe(
      "Extra headers sent on every call to this upstream, e.g. OpenRouter's HTTP-Referer and " +
        'X-Title. Each value is literal text, or {"env": "NAME"} to read a secret from the ' +
        "environment at each call. Never an auth, framing or tracing header of the gateway's " +
        "own; the operator's value wins over a client's forwarded header of the same name.",
    );

export type UpstreamHeaderValue = string | { env: string };
