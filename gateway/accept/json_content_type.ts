import { clientError } from "../runtime/gateway_error.ts";

/** `application/json`, with parameters (`; charset=utf-8`) or none; any letter case. */
export function isJsonContentType(value: string | null): boolean {
  return value !== null && /^\s*application\/json\s*(?:;|$)/i.test(value);
}

/**
 * Proxy POSTs must say they carry JSON, as every official SDK and coding agent does. A browser
 * can send `text/plain`, a form type or no type at all to another site without asking first (a
 * "simple" request), so this refusal is what keeps a web page from spending the gateway's
 * upstream keys through the operator's browser (docs/security.md).
 */
export function requireJsonContentType(request: Request): void {
  const type = request.headers.get("content-type");
  if (isJsonContentType(type)) return;
  const sent = type === null
    ? "no Content-Type"
    : `Content-Type ${JSON.stringify(type.slice(0, 100))}`;
  throw clientError(`send the body as JSON with Content-Type: application/json (got ${sent})`, {
    code: "gw.client.unsupported_media_type",
  });
}
