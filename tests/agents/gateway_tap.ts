/**
 * A pass-through in front of the gateway that notes every call an agent makes: method, path,
 * status, the request's headers and body and, for a refusal, the gateway's error body. Paths the
 * gateway does not serve (e.g. a token-count endpoint) leave no history row, so this is where
 * they show. The headers and body are what the gateway got, so a call can be sent again as the
 * agent sent it (abort_scenario.ts replays an aborted turn).
 */

export interface TapRecord {
  method: string;
  path: string;
  /** When the call came (performance.now()). */
  at: number;
  /** null until the gateway answered; 502 when it could not be reached. */
  status: number | null;
  requestId: string | null;
  /**
   * The headers the gateway got: the agent's, less those a hop sets for itself (`HOP_HEADERS`)
   * and `accept-encoding`. Keys, session headers and the rest are all kept.
   */
  requestHeaders: [string, string][];
  requestBody: string;
  /** The gateway's answer when it refused (status 400 or more). */
  errorBody?: string;
}

export interface GatewayTap {
  url: string;
  records: TapRecord[];
  close(): Promise<void>;
}

/** Headers a hop sets for itself; the rest go through as the agent sent them. */
const HOP_HEADERS = ["host", "connection", "content-length", "transfer-encoding", "keep-alive"];

export function startGatewayTap(gatewayUrl: string): GatewayTap {
  const records: TapRecord[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const body = hasBody ? new Uint8Array(await req.arrayBuffer()) : undefined;
    const headers = new Headers(req.headers);
    for (const name of HOP_HEADERS) headers.delete(name);
    // The gateway never compresses, but a compressed answer would be decoded here and then
    // mislabelled to the agent: ask for none.
    headers.delete("accept-encoding");
    const record: TapRecord = {
      at: performance.now(),
      method: req.method,
      path: url.pathname + url.search,
      status: null,
      requestId: null,
      requestHeaders: [...headers],
      requestBody: body ? new TextDecoder().decode(body) : "",
    };
    records.push(record);
    let res: Response;
    try {
      res = await fetch(`${gatewayUrl}${record.path}`, {
        method: req.method,
        headers,
        body,
        signal: req.signal,
        redirect: "manual",
      });
    } catch (e) {
      record.status = 502;
      return new Response(`tap: gateway unreachable: ${e}`, { status: 502 });
    }
    record.status = res.status;
    record.requestId = res.headers.get("x-request-id");
    const out = new Headers(res.headers);
    for (const name of HOP_HEADERS) out.delete(name);
    if (res.status < 400) return new Response(res.body, { status: res.status, headers: out });
    const text = await res.text();
    record.errorBody = text.slice(0, 4000);
    return new Response(text, { status: res.status, headers: out });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    records,
    close: () => server.shutdown().catch(() => {}),
  };
}
