import { clientError } from "../runtime/gateway_error.ts";
import { boundedMemo } from "../runtime/memo.ts";
import { plainErrorResponse } from "./caller_errors.ts";

/**
 * Deno.serve builds `request.url` by joining the scheme, the Host header exactly as sent, and the
 * request target; Hono then routes on everything after the first "/" past the scheme. So
 * `GET /api/session` with `Host: localhost/admin` was routed as `/admin/api/session`, and a Host
 * with a space or a bad port made every later `new URL(request.url)` throw (a 500). The Host is
 * therefore checked before anything reads the URL built from it (docs/security.md "Host headers").
 */

/**
 * A name (letters, digits, `-`, `_` in dot-separated labels, an optional final dot), an IPv4
 * address or a bracketed IPv6 address, then an optional port.
 */
const HOST =
  /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_-]{1,63}(?:\.[A-Za-z0-9_-]{1,63})*\.?)(?::(\d{1,5}))?$/;

/** 253 characters of name, plus a final dot and a port: nothing longer is a host. */
const MAX_HOST_CHARS = 260;

/**
 * Whether a Host header is `host[:port]` and nothing else. The URL parser has the last word, so
 * what passes is what every later reader of the URL accepts (it refuses `999.0.0.1` or `[::g]`).
 * Clients send the same few Host values on every request: each is judged once.
 */
export const validHost = boundedMemo((host: string): boolean => {
  if (host.length > MAX_HOST_CHARS) return false;
  const match = HOST.exec(host);
  if (!match) return false;
  if (match[1] !== undefined && Number(match[1]) > 65_535) return false;
  try {
    new URL(`http://${host}/`);
    return true;
  } catch {
    return false;
  }
}, { max: 256 });

/**
 * The 400 for a request whose Host is not `host[:port]`, or null. No Host at all (HTTP/1.0) is
 * served: the runtime then builds the URL from the address it listens on. The answer is the
 * operator surface's `{"error": {code, message}}`: the path, and so the client's format, cannot be
 * told from a URL the Host has bent.
 */
export function badHostResponse(request: Request): Response | null {
  const host = request.headers.get("host");
  // The length first, so an oversized value is never kept by the memo.
  if (host === null || (host.length <= MAX_HOST_CHARS && validHost(host))) return null;
  const err = clientError(
    `the Host header ${JSON.stringify(host.slice(0, 100))} is not host[:port] ` +
      "(a host name, an IPv4 address or a bracketed IPv6 address, and an optional port)",
    { code: "gw.client.bad_host" },
  );
  return plainErrorResponse(err, { requestId: crypto.randomUUID() });
}
