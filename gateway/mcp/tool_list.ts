import type { Config } from "../config/schema.ts";
import type { McpServer } from "../config/mcp_schema.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { isRecord } from "../runtime/json.ts";
import type { Logger } from "../runtime/logger.ts";
import type { McpSession } from "./mcp_sessions.ts";
import type { McpState, ToolHints } from "./mcp_state.ts";
import { serverRequest } from "./server_requests.ts";
import { malformed, WireFailure } from "./server_wire.ts";
import {
  keyMayUseTool,
  namespacedTool,
  serverLiveness,
  serversOf,
  serverTargets,
} from "./server_targets.ts";

/** Pages of one server's list the gateway follows, and tools it takes from one server. */
const MAX_PAGES = 20;
const MAX_TOOLS_PER_SERVER = 1000;
const MAX_TOOL_NAME_CHARS = 128;

export interface ListDeps {
  state: McpState;
  clock: Clock;
  fetch: typeof fetch;
  log: Logger;
  env: (name: string) => string | undefined;
}

/**
 * `tools/list` for a key: every server it may use, listed at once, each tool renamed
 * `<server id>__<tool name>` (docs/mcp.md "Supported"), those outside `keys[].mcp_tools` left
 * out. A server that cannot list is left out of the answer and logged; the others still are.
 * One page: the gateway follows each server's cursors itself (up to a bound).
 */
export async function listTools(
  session: McpSession,
  opts: { config: Config; signal: AbortSignal; deps: ListDeps },
): Promise<Record<string, unknown>[]> {
  const { config, deps } = opts;
  const servers = serversOf(config, session.keyId);
  const lists = await Promise.all(servers.map(async (server) => {
    try {
      return await serverTools(server, { session, config, signal: opts.signal, deps });
    } catch (err) {
      deps.log.event("mcp.list_failed", { server: server.id, error: String(err) });
      return [];
    }
  }));
  return lists.flat().filter((tool) =>
    keyMayUseTool(config, { keyId: session.keyId, name: String(tool.name) })
  );
}

async function serverTools(
  server: McpServer,
  opts: { session: McpSession; config: Config; signal: AbortSignal; deps: ListDeps },
): Promise<Record<string, unknown>[]> {
  const { deps, session } = opts;
  const liveness = serverLiveness(server, opts.config);
  const cooldowns = deps.state.cooldowns(server);
  let last: unknown = new GatewayError(`every replica of ${server.id} is paused`, {
    code: "gw.upstream.unavailable",
  });
  for (const target of serverTargets(server, deps.env)) {
    deps.state.targets.set(target.label, target);
    if (cooldowns.isPaused(target.label)) continue;
    const callDeps = {
      clock: deps.clock,
      fetch: deps.fetch,
      maxBytes: server.max_result_bytes,
      maxNotifications: server.max_notifications,
      timeoutMs: liveness.idleMs,
      signal: opts.signal,
    };
    try {
      const serverSession = await deps.state.serverSession(session, { target, deps: callDeps });
      const tools: Record<string, unknown>[] = [];
      const hints = new Map<string, ToolHints>();
      let cursor: string | undefined;
      for (let page = 0; page < MAX_PAGES; page++) {
        const answer = await serverRequest(target, {
          method: "tools/list",
          params: cursor === undefined ? {} : { cursor },
          session: serverSession,
          deps: callDeps,
        });
        const list = answer.result?.tools;
        if (!Array.isArray(list)) {
          throw malformed(target.label, "a tools/list answer without tools");
        }
        for (const tool of list) {
          if (tools.length >= MAX_TOOLS_PER_SERVER) break;
          const named = renamed(tool, server.id);
          if (!named) continue;
          tools.push(named.tool);
          hints.set(named.name, named.hints);
        }
        const next = answer.result?.nextCursor;
        if (typeof next !== "string" || next === "" || tools.length >= MAX_TOOLS_PER_SERVER) break;
        cursor = next;
      }
      deps.state.setHints(server.id, hints);
      cooldowns.success(target.label);
      return tools;
    } catch (err) {
      if (opts.signal.aborted) throw err;
      // A replica that cannot list is charged as one that cannot call: the next list (and
      // call) passes it over while it is paused, rather than waiting on it again.
      const failure = err instanceof WireFailure ? err.error : GatewayError.from(err);
      cooldowns.failure(target.label, failure.code);
      last = err;
    }
  }
  throw last;
}

/** A server's tool under its name as clients see it, or null when it is not a tool. */
function renamed(
  tool: unknown,
  serverId: string,
): { tool: Record<string, unknown>; name: string; hints: ToolHints } | null {
  if (!isRecord(tool) || typeof tool.name !== "string") return null;
  const name = tool.name;
  if (name === "" || name.length > MAX_TOOL_NAME_CHARS) return null;
  const annotations = isRecord(tool.annotations) ? tool.annotations : {};
  const repeatable = annotations.readOnlyHint === true || annotations.idempotentHint === true;
  return {
    tool: { ...tool, name: namespacedTool(serverId, name) },
    name,
    hints: { repeatable },
  };
}
