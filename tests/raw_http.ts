/**
 * One HTTP/1.1 request written by hand over TCP to 127.0.0.1. `fetch` always sends the Host of
 * the URL it is given; a browser that was led to 127.0.0.1 by DNS rebinding sends the attacker's
 * name instead, and only a hand-written request can do the same in a test.
 */
export interface RawAnswer {
  status: number;
  headers: Headers;
  text: string;
}

export async function rawRequest(
  url: string,
  /** `host: null` sends no Host header at all. */
  opts: { method?: string; host: string | null; headers?: Record<string, string>; body?: string },
): Promise<RawAnswer> {
  const target = new URL(url);
  const body = new TextEncoder().encode(opts.body ?? "");
  const lines = [
    `${opts.method ?? "GET"} ${target.pathname}${target.search} HTTP/1.1`,
    ...(opts.host === null ? [] : [`host: ${opts.host}`]),
    "connection: close",
    `content-length: ${body.byteLength}`,
    ...Object.entries(opts.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
  ];
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: Number(target.port) });
  try {
    const head = new TextEncoder().encode(`${lines.join("\r\n")}\r\n\r\n`);
    await conn.write(head);
    if (body.byteLength) await conn.write(body);
    return parse(await new Response(conn.readable).arrayBuffer());
  } finally {
    try {
      conn.close();
    } catch {
      // already closed by reading to the end
    }
  }
}

function parse(buffer: ArrayBuffer): RawAnswer {
  const text = new TextDecoder().decode(buffer);
  const split = text.indexOf("\r\n\r\n");
  const [statusLine = "", ...fields] = text.slice(0, split).split("\r\n");
  const headers = new Headers();
  for (const field of fields) {
    const colon = field.indexOf(":");
    headers.append(field.slice(0, colon).trim(), field.slice(colon + 1).trim());
  }
  let rest = text.slice(split + 4);
  if (headers.get("transfer-encoding")?.includes("chunked")) rest = unchunk(rest);
  return { status: Number(statusLine.split(" ")[1]), headers, text: rest };
}

function unchunk(raw: string): string {
  let out = "";
  for (let at = 0;;) {
    const eol = raw.indexOf("\r\n", at);
    const size = parseInt(raw.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += raw.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}
