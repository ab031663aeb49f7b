/**
 * The operator's extra headers of one upstream (`upstreams[].headers`), set on its calls after
 * the adapter's own and the client's forwarded ones: the operator's value wins over a client's,
 * and the schema keeps every name the gateway sets itself out of reach (auth, framing, tracing;
 * gateway/config/upstream_headers_schema.ts). A value named by an env var is read at each call.
 */
import type { Upstream } from "../config/schema.ts";
import { HEADER_VALUE, isGatewayOwnedHeader } from "../config/upstream_headers_schema.ts";
import { GatewayError } from "../runtime/gateway_error.ts";

function headerFault(upstream: Upstream, message: string): GatewayError {
  return new GatewayError(`upstream ${upstream.id}: ${message}`, {
    code: "gw.upstream.credentials",
    source: "config",
    status: 502,
  });
}

/** Sets the upstream's extra headers on `headers`; a value that cannot be sent is a config fault. */
export function applyUpstreamHeaders(
  headers: Headers,
  opts: { upstream: Upstream; env: (name: string) => string | undefined },
): void {
  const { upstream } = opts;
  const extra = upstream.headers;
  if (!extra) return;
  for (const [name, value] of Object.entries(extra)) {
    // Defence in depth: the schema refuses these already.
    if (isGatewayOwnedHeader(name)) continue;
    if (typeof value === "string") {
      headers.set(name, value);
      continue;
    }
    const secret = opts.env(value.env);
    if (!secret) {
      throw headerFault(upstream, `environment variable ${value.env} (header ${name}) is not set`);
    }
    if (!HEADER_VALUE.test(secret)) {
      throw headerFault(
        upstream,
        `${value.env} (header ${name}) holds characters a header cannot carry`,
      );
    }
    headers.set(name, secret);
  }
}
