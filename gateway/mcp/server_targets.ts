import type { Config } from "../config/schema.ts";
import type { McpServer } from "../config/mcp_schema.ts";
import type { CooldownPolicy } from "../route/cooldown.ts";
import type { ServerTarget } from "./server_wire.ts";

/**
 * A tool server's replicas as the gateway calls them: `url` first, then `replicas`, labelled
 * `<id>#1`, `<id>#2`... Auth is the operator's (a bearer token and headers read from the
 * environment at each call); nothing of the caller's request is ever among them, so a client's
 * credential never reaches a tool server (MCP spec "Security Best Practices", token passthrough).
 */
export function serverTargets(
  server: McpServer,
  env: (name: string) => string | undefined,
): ServerTarget[] {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(server.headers ?? {})) {
    const text = typeof value === "string" ? value : env(value.env);
    if (text !== undefined) headers[name] = text;
  }
  if (server.bearer_token_env) {
    const token = env(server.bearer_token_env);
    if (token) headers.authorization = `Bearer ${token}`;
  }
  return [server.url, ...(server.replicas ?? [])].map((url, i) => ({
    label: `${server.id}#${i + 1}`,
    url,
    headers,
  }));
}

/** The liveness of one server's calls: its own `failover` fields, else the top-level ones. */
export interface ServerLiveness {
  idleMs: number;
  totalMs: number | null;
  cooldown: CooldownPolicy;
}

export function serverLiveness(server: McpServer, config: Config): ServerLiveness {
  const own = server.failover;
  const top = config.failover;
  const pauseSecs = own.pause_secs ?? top.pause_secs;
  return {
    idleMs: (own.idle_timeout_secs ?? top.idle_timeout_secs) * 1000,
    totalMs: own.total_timeout_secs === undefined ? null : own.total_timeout_secs * 1000,
    cooldown: {
      failuresToPause: own.failures_to_pause ?? top.failures_to_pause,
      pauseSecs,
      maxPauseSecs: Math.max(pauseSecs, own.max_pause_secs ?? top.max_pause_secs),
    },
  };
}

/** The enabled server of this id, if the key may use it (`keys[].mcp_servers`; absent = all). */
export function serverFor(
  config: Config,
  opts: { serverId: string; keyId: string | null },
): McpServer | undefined {
  const server = config.mcp_servers.find((s) => s.id === opts.serverId && s.enabled);
  if (!server) return undefined;
  const allowed = keyServers(config, opts.keyId);
  return allowed === undefined || allowed.includes(server.id) ? server : undefined;
}

/** The servers a key may use, enabled, in config order. */
export function serversOf(config: Config, keyId: string | null): McpServer[] {
  const allowed = keyServers(config, keyId);
  return config.mcp_servers.filter((s) =>
    s.enabled && (allowed === undefined || allowed.includes(s.id))
  );
}

function keyServers(config: Config, keyId: string | null): string[] | undefined {
  return keyId === null ? undefined : config.keys.find((k) => k.id === keyId)?.mcp_servers;
}

/** Whether the key may use this tool (`keys[].mcp_tools`, names as clients see them). */
export function keyMayUseTool(config: Config, opts: { keyId: string | null; name: string }) {
  if (opts.keyId === null) return true;
  const tools = config.keys.find((k) => k.id === opts.keyId)?.mcp_tools;
  return tools === undefined || tools.includes(opts.name);
}

/** The separator of a tool's name as clients see it: `<server id>__<tool name>`. */
export const NAME_SEPARATOR = "__";

export function namespacedTool(serverId: string, tool: string): string {
  return `${serverId}${NAME_SEPARATOR}${tool}`;
}

/** A client's tool name split back at its first "__" (a server id never holds one). */
export function splitToolName(name: string): { serverId: string; tool: string } | null {
  const at = name.indexOf(NAME_SEPARATOR);
  if (at <= 0 || at + NAME_SEPARATOR.length >= name.length) return null;
  return { serverId: name.slice(0, at), tool: name.slice(at + NAME_SEPARATOR.length) };
}
