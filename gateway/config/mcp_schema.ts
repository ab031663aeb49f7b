/**
 * Tool servers the gateway fronts on `/mcp` (docs/mcp.md): `mcp_servers[]`, the bounds of the
 * gateway's MCP sessions, and the key fields that say which servers and tools a key may use.
 * Kept apart from schema.ts so the top-level and key schemas each gain a line or two.
 */
import { z } from "zod";
import { envNameField } from "./env_names.ts";
import { MAX_URL_CHARS } from "./trailing_slashes.ts";
import { upstreamHeadersField } from "./upstream_headers_schema.ts";

function intBetween(min: number, max: number) {
  const range = `must be between ${min} and ${max}`;
  return z.int({ error: `must be a whole number between ${min} and ${max}` })
    .min(min, { error: range }).max(max, { error: range });
}

/**
 * A server id: a slug without "__", the separator of the names clients see
 * (`<server id>__<tool name>`), so the first "__" of a name always splits it back.
 */
const serverId = () =>
  z.string().regex(/^[a-z0-9][a-z0-9._-]{0,31}$/, {
    error: 'must be 1-32 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit',
  }).refine((id) => !id.includes("__"), {
    error: 'may not hold "__": it separates the server id from the tool name clients see',
  }).describe(
    'Unique name of the tool server; clients see its tools as "<id>__<tool name>", and it ' +
      "labels history and metrics.",
  );

const endpointUrl = () =>
  z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
    .max(MAX_URL_CHARS, { error: `must be at most ${MAX_URL_CHARS} characters` });

/**
 * The same liveness and cooldown settings the top-level `failover` takes (docs/liveness.md),
 * for one tool server; each one omitted is the top-level value.
 */
export const McpFailoverSchema = z.object({
  idle_timeout_secs: intBetween(1, 3600).optional().describe(
    "Seconds a tool call may go without content from its server (a progress notification or " +
      "the result; pings do not count) before the gateway stops waiting. Omit for the " +
      "top-level failover.idle_timeout_secs.",
  ),
  total_timeout_secs: intBetween(1, 86400).optional().describe(
    "Seconds a tool call may take in all, progress or not; off when omitted.",
  ),
  failures_to_pause: intBetween(1, 100).optional().describe(
    "Consecutive failures that pause a replica (cooldown). Omit for the top-level value.",
  ),
  pause_secs: intBetween(1, 86400).optional().describe(
    "Length of a replica's first cooldown pause in seconds; each further pause doubles it. " +
      "Omit for the top-level value.",
  ),
  max_pause_secs: intBetween(1, 86400).optional().describe(
    "Cap in seconds for the doubling pause. Omit for the top-level value.",
  ),
}).strict();

export const McpServerSchema = z.object({
  id: serverId(),
  url: endpointUrl().describe(
    "The server's Streamable HTTP endpoint (e.g. http://127.0.0.1:3001/mcp). Only HTTP " +
      "servers: a stdio server needs a process per client (docs/mcp.md).",
  ),
  replicas: z.array(endpointUrl()).max(16, { error: "must list at most 16 URLs" }).optional()
    .describe(
      "More endpoints serving the same tools. A call fails over to the next only where it " +
        "cannot run a tool twice: before the call was sent, or for a tool annotated " +
        "readOnlyHint or idempotentHint (docs/mcp.md).",
    ),
  bearer_token_env: envNameField().optional().describe(
    "Name of the env var holding the token sent as `Authorization: Bearer` to this server. " +
      "The caller's own credential is never sent (docs/mcp.md).",
  ),
  headers: upstreamHeadersField(),
  failover: McpFailoverSchema.prefault({}).describe(
    "Idle timeout, total limit and cooldown of this server's calls; omitted fields take the " +
      "top-level failover's.",
  ),
  max_in_flight: intBetween(1, 100000).default(64).describe(
    "Most tool calls one replica of this server gets at once in one gateway process; more go " +
      "to another replica or are answered with a JSON-RPC error.",
  ),
  max_result_bytes: intBetween(1024, 32 * 1024 * 1024).default(4 * 1024 * 1024).describe(
    "Most bytes one message from this server may take (a tool result, a tool list page); a " +
      "larger one is cut and recorded (gw.mcp.oversized).",
  ),
  max_notifications: intBetween(1, 100000).default(1000).describe(
    "Most notifications one tool call may bring before its server is cut for flooding " +
      "(gw.mcp.flood).",
  ),
  prices: z.record(
    z.string().regex(/^\S{1,128}$/, { error: "must be a tool name (1-128 characters, no spaces)" }),
    z.number({ error: "must be a number of USD, 0 or more" }).min(0, { error: "must be 0 or more" })
      .max(1000, { error: "must be at most 1000" }),
  ).optional().describe(
    "Optional USD per call, keyed by the tool's own name on this server: billed on the call's " +
      "row (cost_usd) when the server answered it, and counted by the key's budget and session " +
      "budget like a model call's cost. Tools not listed cost nothing recorded.",
  ),
  enabled: z.boolean().default(true).describe("Set to false to switch this server off."),
}).strict();

export const McpSessionsSchema = z.object({
  max: intBetween(1, 1_000_000).default(1000).describe(
    "Most MCP sessions this process keeps; an initialize beyond it is refused " +
      "(gw.mcp.sessions_full) once idle and aged sessions are dropped.",
  ),
  max_age_secs: intBetween(60, 7 * 86400).default(86400).describe(
    "Seconds an MCP session lives from its initialize, however busy.",
  ),
  idle_secs: intBetween(10, 86400).default(1800).describe(
    "Seconds an MCP session lives without a message from its client.",
  ),
}).strict();

/** The key fields, spread into the key schema. */
export const keyMcpFields = () => ({
  mcp_servers: z.array(z.string()).optional().describe(
    "Ids of the tool servers (mcp_servers) this key may use on /mcp. Omit to allow every one; " +
      "an empty list allows none.",
  ),
  mcp_tools: z.array(z.string()).min(1, { error: "must name at least one tool" }).optional()
    .describe(
      'Tools this key may list and call, as clients see them ("<server id>__<tool name>"). ' +
        "Omit to allow every tool of its servers.",
    ),
});

export type McpServer = z.output<typeof McpServerSchema>;
export type McpFailover = z.output<typeof McpFailoverSchema>;
export type McpSessions = z.output<typeof McpSessionsSchema>;
