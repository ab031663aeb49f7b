// The SDK's wildcard export names no types for a `.js` path: each import says where they are.
// @ts-types="@modelcontextprotocol/sdk/server/mcp"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
// @ts-types="@modelcontextprotocol/sdk/server/webStandardStreamableHttp"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { z } from "zod";
import type { Clock } from "../../gateway/runtime/clock.ts";

/**
 * A tool server built with the official SDK (Streamable HTTP, one SDK server per session), for
 * the MCP tests. Its tools: `lookup` (readOnlyHint), `write` (no hints: it may not run twice),
 * `wait` (runs until cancelled, sending progress when asked). `mode` makes it answer, stay
 * silent on every tool call (the call is taken and never answered), or hold `lookup` until
 * `open()`.
 */
export interface FakeMcp {
  url: string;
  /** Every tool call it took: tool name and arguments, in order. */
  calls: { tool: string; args: Record<string, unknown> }[];
  /** The ids of `notifications/cancelled` it received. */
  cancelled: unknown[];
  /** How many DELETEs of a session it took. */
  deleted: number;
  /** Authorization headers each POST carried (null when none). */
  authorizations: (string | null)[];
  /** answer; silent: never answer a call; gate: answer once `open` is called. */
  mode: "answer" | "silent" | "gate";
  /** Lets the calls held by mode gate answer. */
  open(): void;
  /** Answers one request, as its server does: for a gateway whose `fetch` reaches it in-process. */
  handle(request: Request): Promise<Response>;
  close(): Promise<void>;
}

/**
 * `inProcess`: no socket; its URL is `http://<name>.mcp.test/mcp` and a test's `fetch` hands it
 * requests (`handle`), so a gateway on the virtual clock reaches it with no real I/O between.
 */
export function startFakeMcp(
  opts: {
    name: string;
    tools?: string[];
    inProcess?: boolean;
    /** `wait` sends `count` more progress notifications, one every `everyMs` of `clock`. */
    progress?: { clock: Clock; everyMs: number; count: number };
  },
): FakeMcp {
  const transports = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const abort = new AbortController();
  const fake: FakeMcp = {
    url: "",
    calls: [],
    cancelled: [],
    authorizations: [],
    deleted: 0,
    mode: "answer",
    open: () => gate.resolve(),
    handle: (request) => handle(request),
    close: async () => {
      abort.abort();
      for (const t of transports.values()) await t.close().catch(() => {});
      await server?.finished;
    },
  };
  const gate = Promise.withResolvers<void>();
  const hold = (signal: AbortSignal) =>
    new Promise<never>((_, reject) => {
      const stop = () => reject(new Error("cancelled"));
      if (signal.aborted) stop();
      signal.addEventListener("abort", stop, { once: true });
      abort.signal.addEventListener("abort", stop, { once: true });
    });
  const build = () => {
    const mcp = new McpServer({ name: opts.name, version: "1.0.0" });
    const wanted = opts.tools ?? ["lookup", "write", "wait"];
    const text = (tool: string, args: Record<string, unknown>) => ({
      content: [{ type: "text" as const, text: `${opts.name}:${tool}:${JSON.stringify(args)}` }],
    });
    if (wanted.includes("lookup")) {
      mcp.registerTool("lookup", {
        description: "Reads a value.",
        inputSchema: { key: z.string() },
        annotations: { readOnlyHint: true },
      }, async (args, extra) => {
        fake.calls.push({ tool: "lookup", args });
        if (fake.mode === "silent") await hold(extra.signal);
        if (fake.mode === "gate") await gate.promise;
        return text("lookup", args);
      });
    }
    if (wanted.includes("write")) {
      mcp.registerTool("write", {
        description: "Writes a value.",
        inputSchema: { key: z.string() },
        annotations: { readOnlyHint: false, destructiveHint: true },
      }, async (args, extra) => {
        fake.calls.push({ tool: "write", args });
        if (fake.mode === "silent") await hold(extra.signal);
        return text("write", args);
      });
    }
    if (wanted.includes("wait")) {
      mcp.registerTool("wait", {
        description: "Runs until cancelled.",
        inputSchema: {},
      }, async (args, extra) => {
        fake.calls.push({ tool: "wait", args });
        const token = extra._meta?.progressToken;
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: 1, message: "started" },
          });
          for (let i = 0; i < (opts.progress?.count ?? 0); i++) {
            await opts.progress!.clock.sleep(opts.progress!.everyMs, extra.signal);
            await extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress: i + 2, message: "working" },
            });
          }
        }
        await hold(extra.signal);
        return text("wait", args);
      });
    }
    return mcp;
  };
  const handle = async (request: Request): Promise<Response> => {
    if (request.method === "POST") fake.authorizations.push(request.headers.get("authorization"));
    if (request.method === "DELETE") fake.deleted++;
    const id = request.headers.get("mcp-session-id");
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (id) return new Response("unknown session", { status: 404 });
      const made: WebStandardStreamableHTTPServerTransport =
        new WebStandardStreamableHTTPServerTransport({
          sessionIdGenerator: () => crypto.randomUUID(),
          onsessioninitialized: (sid) => void transports.set(sid, made),
        });
      await build().connect(made);
      // What arrives, seen before the SDK acts on it: the proof a cancellation reached us.
      const onmessage = made.onmessage;
      made.onmessage = (message, extra) => {
        if ("method" in message && message.method === "notifications/cancelled") {
          fake.cancelled.push(message.params?.requestId);
        }
        onmessage?.(message, extra);
      };
      transport = made;
    }
    return await transport.handleRequest(request);
  };
  const server = opts.inProcess ? null : Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    signal: abort.signal,
    onListen: () => {},
  }, handle);
  fake.url = server
    ? `http://127.0.0.1:${server.addr.port}/mcp`
    : `http://${opts.name}.mcp.test/mcp`;
  return fake;
}

/**
 * A `fetch` that hands requests to in-process fakes by host, whose answers' bodies error when
 * the caller aborts, as a real fetch's do (the gateway stops reading a tool server that way).
 */
export function inProcessFetch(fakes: FakeMcp[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const fake = fakes.find((f) => new URL(f.url).host === new URL(request.url).host);
    if (!fake) throw new TypeError(`connection refused: ${request.url}`);
    const signal = request.signal;
    if (signal.aborted) throw signal.reason;
    const response = await fake.handle(request);
    const inner = response.body;
    if (!inner) return response;
    const reader = inner.getReader();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        const onAbort = () => {
          controller.error(signal.reason ?? new DOMException("aborted", "AbortError"));
          reader.cancel().catch(() => {});
        };
        signal.addEventListener("abort", onAbort, { once: true });
        (async () => {
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              controller.enqueue(value);
            }
            controller.close();
          } catch (err) {
            if (!signal.aborted) controller.error(err);
          } finally {
            signal.removeEventListener("abort", onAbort);
          }
        })();
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}
