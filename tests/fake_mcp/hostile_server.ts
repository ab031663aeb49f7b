/**
 * A tool server written by hand, not with the SDK, so it can send what no SDK server would: it
 * initializes and lists like a good one, and each tool answers with one kind of bad frame.
 * Every tool says it is read-only, so the gateway may fail over: the error the caller gets is
 * the cut itself, not "may have run".
 */
export const HOSTILE_TOOLS = {
  /** An SSE event whose data is not JSON. */
  garbage: () => sse(["data: {not json\n\n"]),
  /** Far more progress notifications than the bound, then the result. */
  flood: (id: unknown) =>
    sse([
      ...Array.from({ length: 500 }, (_, i) =>
        event({
          jsonrpc: "2.0",
          method: "notifications/message",
          params: { level: "info", data: i },
        })),
      event({ jsonrpc: "2.0", id, result: { content: [] } }),
    ]),
  /** A result far over the bound on one message. */
  huge: (id: unknown) =>
    json({
      jsonrpc: "2.0",
      id,
      result: { content: [{ type: "text", text: "x".repeat(64 * 1024) }] },
    }),
  /** A result nested deeper than the JSON guard allows. */
  deep: (id: unknown) =>
    new Response(
      `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"a":${"[".repeat(300)}${
        "]".repeat(300)
      }}}`,
      { headers: { "content-type": "application/json" } },
    ),
} as const;

export interface HostileMcp {
  url: string;
  close(): Promise<void>;
}

export function startHostileMcp(): HostileMcp {
  const abort = new AbortController();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    signal: abort.signal,
    onListen: () => {},
  }, async (request) => {
    if (request.method !== "POST") return new Response(null, { status: 405 });
    const message = await request.json();
    if (!("id" in message)) return new Response(null, { status: 202 });
    if (message.method === "initialize") {
      return json({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          protocolVersion: message.params.protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: "hostile", version: "1" },
        },
      }, { "mcp-session-id": "hostile-session" });
    }
    if (message.method === "tools/list") {
      return json({
        jsonrpc: "2.0",
        id: message.id,
        result: {
          tools: Object.keys(HOSTILE_TOOLS).map((name) => ({
            name,
            inputSchema: { type: "object" },
            annotations: { readOnlyHint: true },
          })),
        },
      });
    }
    const tool = HOSTILE_TOOLS[message.params?.name as keyof typeof HOSTILE_TOOLS];
    if (!tool) {
      return json({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "no" } });
    }
    return tool(message.id);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/mcp`,
    close: async () => {
      abort.abort();
      await server.finished;
    },
  };
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
