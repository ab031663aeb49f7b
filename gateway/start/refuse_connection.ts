import { REAL_TIME } from "../runtime/clock.ts";
import { errorFor } from "../accept/caller_errors.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { concatBytes } from "../runtime/join_bytes.ts";

/** Enough for any request line and the headers that choose the error format. */
const HEAD_BYTES = 16 * 1024;
/** What is read and thrown away after the answer, so the close is a FIN and not a reset. */
const DRAIN_BYTES = 64 * 1024;
const RETRY_AFTER_SECS = 1;
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]\r\n/;
const encoder = new TextEncoder();

/**
 * The answer to a connection beyond the cap (docs/security.md "Connection floods"): 503
 * `gw.gateway.too_many_connections` in the caller's format, with `Retry-After: 1` and
 * `connection: close`, written by hand on the raw connection because Deno's server is never
 * started for it.
 *
 * The request line is read first, so the answer goes to a client that has sent its request (and
 * in its format); then the gateway half-closes and reads what the client still sends, up to 64 KiB
 * and until `withinMs`, before closing: closing a socket with unread bytes sends a reset, which
 * can destroy the 503 on its way. A client that sends no request line in time (nothing, or an
 * HTTP/2 preface) is closed without an answer. Resolves when the connection is closed.
 */
export async function refuseConnection(conn: Deno.Conn, opts: { withinMs: number }): Promise<void> {
  const cancel = REAL_TIME.after(opts.withinMs, () => closeQuietly(conn));
  try {
    const head = await readHead(conn);
    const request = head && requestOf(head.text);
    if (!request) return;
    await writeAll(conn, await wireBytes(refusal(request)));
    await conn.closeWrite();
    const buffer = new Uint8Array(16 * 1024);
    for (let read = head.bytes; read < DRAIN_BYTES;) {
      const n = await conn.read(buffer);
      if (n === null) break;
      read += n;
    }
  } catch {
    // The client went away, or the deadline closed the connection: nothing more to say.
  } finally {
    cancel();
    closeQuietly(conn);
  }
}

function refusal(request: Request): Response {
  const err = new GatewayError(
    "this gateway process has too many open connections; retry in a moment",
    { code: "gw.gateway.too_many_connections", retryAfterSecs: RETRY_AFTER_SECS },
  );
  const response = errorFor(request, err);
  response.headers.set("retry-after", String(RETRY_AFTER_SECS));
  return response;
}

/** Reads until the request line is complete (or HEAD_BYTES, or the end). */
async function readHead(conn: Deno.Conn): Promise<{ text: string; bytes: number } | null> {
  const buffer = new Uint8Array(HEAD_BYTES);
  let filled = 0;
  while (filled < HEAD_BYTES) {
    const n = await conn.read(buffer.subarray(filled));
    if (n === null) return null;
    filled += n;
    const text = new TextDecoder().decode(buffer.subarray(0, filled));
    if (text.includes("\r\n")) return { text, bytes: filled };
  }
  return null;
}

/** Just what choosing the error's format needs: the path and the header names (not_found.ts). */
function requestOf(head: string): Request | null {
  const line = REQUEST_LINE.exec(head);
  if (!line) return null;
  const headers = new Headers();
  const end = head.indexOf("\r\n\r\n");
  const fields = head.slice(line[0].length, end < 0 ? head.length : end).split("\r\n");
  for (const field of fields.slice(0, 100)) {
    const colon = field.indexOf(":");
    if (colon <= 0) continue;
    try {
      headers.append(field.slice(0, colon).trim(), field.slice(colon + 1).trim());
    } catch {
      // A field Headers refuses tells nothing about the format.
    }
  }
  try {
    return new Request(new URL(line[2] ?? "/", "http://gateway.invalid"), { headers });
  } catch {
    return null;
  }
}

async function wireBytes(response: Response): Promise<Uint8Array> {
  const body = new Uint8Array(await response.arrayBuffer());
  const lines = [`HTTP/1.1 ${response.status} ${REASONS[response.status] ?? "Error"}`];
  response.headers.forEach((value, name) => lines.push(`${name}: ${value}`));
  lines.push(`content-length: ${body.byteLength}`, "connection: close", "", "");
  return concatBytes([encoder.encode(lines.join("\r\n")), body]);
}

const REASONS: Record<number, string> = { 503: "Service Unavailable" };

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.byteLength;) at += await conn.write(bytes.subarray(at));
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}
