/**
 * The MCP rows of the fault table (docs/mcp.md "Fault table"): what the first replica of a tool
 * server does to a `tools/call`, and what the gateway must make of it. The rule every row
 * follows is docs/mcp.md "Tool calls: liveness and failover": a call that was never taken fails
 * over for any tool; a call lost after it was sent fails over only for a tool annotated
 * read-only or idempotent, and otherwise answers -32010 (gw.mcp.tool_may_have_run); what the
 * server itself answers is passed on.
 */
import type { GatewayCode } from "../../gateway/runtime/gateway_error.ts";
import type { AttemptOutcome } from "../../db/records.ts";
import type { McpFaultServe } from "../fake_mcp/faulty_server.ts";

/**
 * `not_taken`: the server did not take the call (fail over, any tool). `lost`: it may have run
 * (fail over only a read-only or idempotent tool). `answered`: the server's own answer, passed
 * on. `same_replica`: the server forgot its session; a new one is opened on it and the call
 * sent once more (the spec's 404 says the message was not taken).
 */
export type McpEffect = "not_taken" | "lost" | "answered" | "same_replica";

export interface McpFault {
  name: string;
  /** What the faulty replica does; `refused`: nothing listens at its address. */
  serve: McpFaultServe | "refused";
  effect: McpEffect;
  /** The failed hop's outcome, where one fails. */
  outcome?: AttemptOutcome;
  /** The gateway's code on the failed hop (and the cause inside a -32010). */
  code?: GatewayCode;
}

export const MCP_FAULTS: readonly McpFault[] = [
  {
    name: "connection refused",
    serve: "refused",
    effect: "not_taken",
    outcome: "error",
    code: "gw.upstream.unreachable",
  },
  {
    name: "HTTP 503 to the call",
    serve: "http_503",
    effect: "not_taken",
    outcome: "error",
    code: "gw.upstream.error",
  },
  { name: "session forgotten (404)", serve: "forgot_session", effect: "same_replica" },
  {
    name: "HTTP 500 to the call",
    serve: "http_500",
    effect: "lost",
    outcome: "error",
    code: "gw.upstream.error",
  },
  {
    name: "silent after the headers",
    serve: "silent",
    effect: "lost",
    outcome: "idle_timeout",
    code: "gw.upstream.idle_timeout",
  },
  {
    name: "stream ends without a result",
    serve: "cut",
    effect: "lost",
    outcome: "error",
    code: "gw.mcp.malformed",
  },
  {
    name: "a frame that is not JSON",
    serve: "garbage",
    effect: "lost",
    outcome: "error",
    code: "gw.mcp.malformed",
  },
  {
    name: "notification flood",
    serve: "flood",
    effect: "lost",
    outcome: "error",
    code: "gw.mcp.flood",
  },
  {
    name: "result over the bound",
    serve: "oversized",
    effect: "lost",
    outcome: "error",
    code: "gw.mcp.oversized",
  },
  { name: "tool error result (isError)", serve: "tool_error", effect: "answered" },
  { name: "JSON-RPC error of the server", serve: "rpc_error", effect: "answered" },
];

/** The two kinds of tool each row runs against. */
export const MCP_TOOLS = [
  { tool: "lookup", repeatable: true },
  { tool: "write", repeatable: false },
] as const;

/** What one cell must end with: who answered, the JSON-RPC code, the hops. */
export interface McpExpectation {
  /** "spare": the healthy second replica; "faulty": the first; null: an error. */
  answeredBy: "spare" | "faulty" | null;
  /** The JSON-RPC error code the caller gets, when not answered. */
  rpcCode: number | null;
  /** The request's row: its code, null on success. */
  rowCode: GatewayCode | null;
  attempts: [string, AttemptOutcome][];
}

/** A row's expectation for a tool, derived from the rule above. */
export function expectedFor(fault: McpFault, repeatable: boolean): McpExpectation {
  const failed: [string, AttemptOutcome] = ["s#1", fault.outcome ?? "error"];
  const spare: [string, AttemptOutcome] = ["s#2", "success"];
  switch (fault.effect) {
    case "answered":
    case "same_replica":
      return { answeredBy: "faulty", rpcCode: null, rowCode: null, attempts: [["s#1", "success"]] };
    case "not_taken":
      return { answeredBy: "spare", rpcCode: null, rowCode: null, attempts: [failed, spare] };
    case "lost":
      return repeatable
        ? { answeredBy: "spare", rpcCode: null, rowCode: null, attempts: [failed, spare] }
        : {
          answeredBy: null,
          rpcCode: -32010,
          rowCode: "gw.mcp.tool_may_have_run",
          attempts: [failed],
        };
  }
}
