/**
 * A forward proxy on 127.0.0.1 that the agents get as HTTP_PROXY/HTTPS_PROXY/ALL_PROXY. It
 * refuses (403, then close) every CONNECT or absolute-URI request to a host off this machine and
 * records it, so a test can show what an agent tried to reach. A loopback target is passed
 * through, so an agent that ignores NO_PROXY still reaches the gateway (and is recorded too).
 */

export interface TrapHit {
  /** CONNECT, GET, ... or "?" when the first bytes were not an HTTP request line. */
  method: string;
  /** host:port for CONNECT, the URL for plain HTTP, or the first bytes. */
  target: string;
  host: string;
  passedThrough: boolean;
}

export interface ProxyTrap {
  url: string;
  hits: TrapHit[];
  close(): Promise<void>;
}

const HEAD_LIMIT = 16 * 1024;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]", "::1"]);
const encoder = new TextEncoder();

export function startProxyTrap(): ProxyTrap {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const hits: TrapHit[] = [];
  const conns = new Set<Deno.Conn>();
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      serve(conn, hits).finally(() => {
        conns.delete(conn);
        closeQuietly(conn);
      });
    }
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    hits,
    async close() {
      closeQuietly(listener);
      for (const conn of conns) closeQuietly(conn);
      await accepting;
    },
  };
}

async function serve(conn: Deno.Conn, hits: TrapHit[]): Promise<void> {
  const head = await readHead(conn);
  if (!head) return;
  const line = head.text.slice(0, head.text.indexOf("\r\n"));
  const [method = "?", target = ""] = line.split(" ");
  if (!/^[A-Z]+$/.test(method) || !/ HTTP\/1\.[01]$/.test(line)) {
    hits.push({
      method: "?",
      target: JSON.stringify(line.slice(0, 80)),
      host: "",
      passedThrough: false,
    });
    return;
  }
  const where = targetOf(method, target);
  const passedThrough = where !== null && LOOPBACK.has(where.hostname);
  hits.push({ method, target, host: where?.hostname ?? "", passedThrough });
  if (!where || !passedThrough) {
    const body = `pulsegate test trap: no network beyond 127.0.0.1 (${method} ${target})\n`;
    await conn.write(encoder.encode(
      `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\n` +
        `connection: close\r\n\r\n${body}`,
    )).catch(() => {});
    return;
  }
  const upstream = await Deno.connect({ hostname: "127.0.0.1", port: Number(where.port || 80) })
    .catch(() => null);
  if (!upstream) return;
  try {
    if (method === "CONNECT") {
      await conn.write(encoder.encode("HTTP/1.1 200 Connection established\r\n\r\n"));
    } else {
      // Absolute-form to origin-form; the rest of the head and any body bytes go as they came.
      const originForm = line.replace(target, `${where.pathname}${where.search}`);
      await upstream.write(encoder.encode(head.text.replace(line, originForm)));
    }
    if (head.rest.length) await upstream.write(head.rest);
    await Promise.allSettled([
      conn.readable.pipeTo(upstream.writable),
      upstream.readable.pipeTo(conn.writable),
    ]);
  } finally {
    closeQuietly(upstream);
  }
}

function targetOf(method: string, target: string): URL | null {
  try {
    return new URL(method === "CONNECT" ? `http://${target}` : target);
  } catch {
    return null;
  }
}

/** Reads up to the blank line that ends the request head; `rest` is whatever came after it. */
async function readHead(conn: Deno.Conn): Promise<{ text: string; rest: Uint8Array } | null> {
  let bytes = new Uint8Array(0);
  const buf = new Uint8Array(4096);
  while (bytes.length < HEAD_LIMIT) {
    const n = await conn.read(buf).catch(() => null);
    if (!n) break;
    const joined = new Uint8Array(bytes.length + n);
    joined.set(bytes);
    joined.set(buf.subarray(0, n), bytes.length);
    bytes = joined;
    // Not an HTTP request line (a SOCKS greeting, TLS): no point waiting for a blank line.
    if (bytes[0]! < 0x41 || bytes[0]! > 0x5a) break;
    const text = new TextDecoder("latin1").decode(bytes);
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) return { text: text.slice(0, end + 4), rest: bytes.subarray(end + 4) };
  }
  if (!bytes.length) return null;
  return {
    text: `${new TextDecoder("latin1").decode(bytes.subarray(0, 80))}\r\n`,
    rest: new Uint8Array(),
  };
}

function closeQuietly(closer: { close(): void }): void {
  try {
    closer.close();
  } catch { /* already closed */ }
}
