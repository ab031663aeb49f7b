/**
 * A tool server written by hand that commits one fault of the MCP fault table
 * (tests/fault_matrix/mcp_faults.ts) on every `tools/call`, while it initializes and lists like
 * a good one. Its tools: `lookup` (readOnlyHint) and `write` (no hints).
 */
export type McpFaultServe =
  | "http_503"
  | "http_500"
  | "forgot_session"
  | "silent"
  | "cut"
  | "garbage"
  | "flood"
  | "oversized"
  | "tool_error"
  | "rpc_error";

export interface FaultyMcp {
  url: string;
  fault: McpFaultServe;
  /** Tool calls it took, by tool name. */
  calls: string[];
  close(): Promise<void>;
}

export function startFaultyMcp(): FaultyMcp {
  const abort = new AbortController();
  const sessions = new Set<string>();
  const forgotOnce = new Set<string>();
  let next = 0;
  const faulty: FaultyMcp = {
    url: "",
    fault: "http_500",
    calls: [],
    close: async () => {
      abort.abort();
      await server.finished;
    },
  };
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    signal: abort.signal,
    onListen: () => {},
  }, async (request) => {
    if (request.method === "DELETE") return new Response(null, { status: 200 });
    if (request.method !== "POST") return new Response(null, { status: 405 });
    const message = await request.json();
    const session = request.headers.get("mcp-session-id");
    if (message.method === "initialize") {
      const id = `faulty-${++next}`;
      sessions.add(id);
      return json({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "faulty", version: "1" },
        },
      }, { "mcp-session-id": id });
    }
    if (!session || !sessions.has(session)) return new Response(null, { status: 404 });
    if (!("id" in message)) return new Response(null, { status: 202 });
    if (message.method === "tools/list") {
      return json({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          tools: [
            {
              name: "lookup",
              inputSchema: { type: "object" },
              annotations: { readOnlyHint: true },
            },
            { name: "write", inputSchema: { type: "object" } },
          ],
        },
      });
    }
    const tool = String(message.params?.name);
    faulty.calls.push(tool);
    if (faulty.fault === "forgot_session" && !forgotOnce.has(tool)) {
      // Forgets the session at the tool's first call, as a restarted server does.
      forgotOnce.add(tool);
      sessions.delete(session);
      return new Response(null, { status: 404 });
    }
    if (faulty.fault === "forgot_session") {
      return json({
        jsonrpc: "2.0",
        id: message.id,
        result: { content: [{ type: "text", text: `faulty:${tool}` }] },
      });
    }
    return serve(faulty.fault, { id: message.id, signal: request.signal });
  });
  faulty.url = `http://127.0.0.1:${server.addr.port}/mcp`;
  return faulty;
}

function serve(
  fault: Exclude<McpFaultServe, "forgot_session">,
  opts: { id: unknown; signal: AbortSignal },
): Response {
  const { id } = opts;
  switch (fault) {
    case "http_503":
      return new Response("busy", { status: 503 });
    case "http_500":
      return new Response("broke", { status: 500 });
    case "silent":
      return new Response(
        new ReadableStream({
          start(controller) {
            opts.signal.addEventListener("abort", () => controller.close(), { once: true });
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    case "cut":
      return sse([]);
    case "garbage":
      return sse(["data: {not json\n\n"]);
    case "flood":
      return sse([
        ...Array.from(
          { length: 100 },
          (_, i) =>
            event({
              jsonrpc: "2.0",
              method: "notifications/message",
              params: { level: "info", data: i },
            }),
        ),
        event({ jsonrpc: "2.0", id, result: { content: [] } }),
      ]);
    case "oversized":
      return json({
        jsonrpc: "2.0",
        id,
        result: { content: [{ type: "text", text: "x".repeat(8192) }] },
      });
    case "tool_error":
      return json({
        jsonrpc: "2.0",
        id,
        result: { content: [{ type: "text", text: "no such key" }], isError: true },
      });
    case "rpc_error":
      return json({ jsonrpc: "2.0", id, error: { code: -32602, message: "bad arguments" } });
  }
}

function event(message: unknown): string {
  return `event: message\ndata: ${JSON.stringify(message)}\n\n`;
}

function sse(events: string[]): Response {
  return new Response(events.join(""), { headers: { "content-type": "text/event-stream" } });
}

function json(body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    headers: { ...headers, "content-type": "application/json" },
  });
}
