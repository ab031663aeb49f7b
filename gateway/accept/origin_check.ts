import type { MiddlewareHandler } from "hono";
import { clientError, type GatewayError } from "../runtime/gateway_error.ts";
import { errorFor } from "./caller_errors.ts";
import type { RunState } from "../policy/run_state.ts";
import { boundedMemo } from "../runtime/memo.ts";

/**
 * What a web page in the operator's browser must not be able to do (docs/security.md):
 *
 * - Reach an open gateway under its own name. With no admin token or no gateway keys the
 *   gateway answers without a credential on loopback; a page that rebinds its DNS name to
 *   127.0.0.1 would then be "same origin" with it. In that open mode only loopback host names
 *   (and the configured public URL's) are served.
 * - Change anything through the admin API, the abort endpoints or /mcp from another origin, token or
 *   not: a state-changing request whose `Origin` is not this gateway, or that the browser marks
 *   as coming from another site (`Sec-Fetch-Site`), is refused. Scripts and SDKs send neither.
 */
export interface OriginCheckDeps {
  adminToken: string | undefined;
  state: RunState;
  /** PULSEGATE_PUBLIC_URL: the name a reverse proxy or other instances reach us by. */
  publicUrl?: string;
  /** /metrics served without the admin token (loopback only): it is open, too. */
  metricsOpen?: boolean;
}

// `/mcp` too: the MCP spec asks a Streamable HTTP server to check every request's Origin
// (docs/mcp.md "Supported").
const CHANGES_CHECKED = /^\/(?:(?:admin\/api|request|sessions)\/|mcp$)/;
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
// A request the user typed or bookmarked is `none`; the page's own calls are `same-origin`.
const OWN_FETCH_SITES = new Set(["same-origin", "none"]);

export function originCheck(deps: OriginCheckDeps): MiddlewareHandler {
  return async (c, next) => {
    // The path the router matched (percent-decoded), so what is checked is what is served.
    const refusal = originRefusal(c.req.raw, { path: c.req.path, deps });
    if (refusal) return errorFor(c.req.raw, refusal);
    await next();
  };
}

/** Both checks for a request to `path`: its refusal, or null. */
export function originRefusal(
  request: Request,
  at: { path: string; deps: OriginCheckDeps },
): GatewayError | null {
  return hostRefusal(request, at) ?? crossSiteRefusal(request, at);
}

/** Open mode: something answers without a credential, which is allowed on loopback only. */
export function openMode(deps: OriginCheckDeps): boolean {
  if (!deps.state.loopback) return false;
  return !deps.adminToken || !deps.state.config?.keys.length;
}

function hostRefusal(
  request: Request,
  opts: { path: string; deps: OriginCheckDeps },
): GatewayError | null {
  const { deps } = opts;
  const openMetrics = deps.metricsOpen === true && opts.path === "/metrics";
  if (!openMode(deps) && !openMetrics) return null;
  const host = requestHost(request);
  const name = hostName(host);
  if (name !== null && (isLoopbackName(name) || name === publicName(deps))) return null;
  return clientError(
    `host name ${JSON.stringify(host.slice(0, 100))} is not served: with no admin token or no ` +
      "gateway keys the gateway answers only to localhost, 127.0.0.1 and [::1], so a web page " +
      "cannot reach it under its own name (DNS rebinding); set PULSEGATE_ADMIN_TOKEN and " +
      "gateway keys to serve other names",
    { code: "gw.client.host_not_allowed", status: 403 },
  );
}

function crossSiteRefusal(
  request: Request,
  opts: { path: string; deps: OriginCheckDeps },
): GatewayError | null {
  const { deps } = opts;
  if (SAFE_METHODS.has(request.method)) return null;
  if (!CHANGES_CHECKED.test(opts.path)) return null;
  const site = request.headers.get("sec-fetch-site");
  const origin = request.headers.get("origin");
  const foreignSite = site !== null && !OWN_FETCH_SITES.has(site.toLowerCase());
  if (!foreignSite && (origin === null || isOwnOrigin(origin, { request, deps }))) return null;
  const from = origin === null ? `Sec-Fetch-Site ${site}` : `Origin ${origin.slice(0, 100)}`;
  return clientError(
    `cross-site request refused (${from}): admin and abort changes are taken only from this ` +
      "gateway's own page or from clients that are not browsers",
    { code: "gw.client.cross_site", status: 403 },
  );
}

function isOwnOrigin(origin: string, opts: { request: Request; deps: OriginCheckDeps }): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // "null" (sandboxed frames, file: pages) and anything unparseable
  }
  if (opts.deps.publicUrl && url.origin === new URL(opts.deps.publicUrl).origin) return true;
  // Compared by host and port only: behind a TLS proxy the page is https and we see http.
  try {
    return new URL(`${url.protocol}//${requestHost(opts.request)}`).host === url.host;
  } catch {
    return false;
  }
}

function requestHost(request: Request): string {
  return request.headers.get("host") ?? new URL(request.url).host;
}

/**
 * The host name of a Host header, lower case, without port or a trailing dot; null if bad.
 * Clients send the same few Host values on every request: each is parsed once.
 */
const hostName = boundedMemo((host: string): string | null => {
  try {
    return new URL(`http://${host}`).hostname.replace(/\.$/, "");
  } catch {
    return null;
  }
}, { max: 256 });

function isLoopbackName(name: string): boolean {
  return name === "localhost" || name === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(name);
}

function publicName(deps: OriginCheckDeps): string | null {
  return deps.publicUrl ? hostName(new URL(deps.publicUrl).host) : null;
}
