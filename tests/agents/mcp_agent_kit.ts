/**
 * What the agents' MCP tests share (docs/mcp.md): a gateway with one tool server (the SDK-built
 * fake, its tool `lookup`) and a fake model upstream of the agent's own kind, which asks for the
 * tool on the prompt's turn and answers once the tool's result is in; a throwaway home behind the
 * proxy trap; one headless run; and the checks: the agent's answer, the one tool call through
 * /mcp with its row, the result reaching the model, no key sent to the tool server.
 */
import assert from "node:assert/strict";
import type { Call, Script } from "../fake_upstreams/server.ts";
import { startFakeUpstream } from "../fake_upstreams/server.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import * as geminiFake from "../fake_upstreams/gemini_script.ts";
import { startTestGateway } from "../harness.ts";
import { startFakeMcp } from "../fake_mcp/sdk_server.ts";
import type { AgentHome } from "./agent_home.ts";
import { makeAgentHome } from "./agent_home.ts";
import { startProxyTrap } from "./proxy_trap.ts";
import { runWithTimeout } from "./run_command.ts";
import { firstLines } from "./run_report.ts";

export const MCP_AGENT_KEY = "pg-agent-test-key-0123456789";
const KEY_ENV = "PULSEGATE_KEY_AGENT_TEST";
export const MCP_PROMPT = "Look up the key k7 with the lookup tool and reply with what it says.";
const TOOL_TEXT = 'one:lookup:{"key":"k7"}';
/** The tool's text as it stands in a request body: inside a JSON string, quotes escaped. */
const TOOL_TEXT_IN_BODY = JSON.stringify(TOOL_TEXT).slice(1, -1);
export const MCP_ANSWER = "Pulsegate MCP answer: 4217.";
const USAGE = { input: 1200, output: 12 };

export type ModelKind = "anthropic" | "gemini";

/** How one agent is pointed at the gateway's /mcp and started. */
export interface McpAgentLaunch {
  args: string[];
  env: Record<string, string>;
}

/**
 * The tool as the agent offered it to its model (each agent names MCP tools its own way): the
 * offered tool whose name ends with the gateway's `one__lookup`.
 */
function offeredTool(kind: ModelKind, json: unknown): string | undefined {
  const names = kind === "anthropic"
    ? ((json as { tools?: { name: string }[] })?.tools ?? []).map((t) => t.name)
    : ((json as { tools?: { functionDeclarations?: { name: string }[] }[] })?.tools ?? [])
      .flatMap((t) => (t.functionDeclarations ?? []).map((f) => f.name));
  return names.find((name) => name.endsWith("one__lookup"));
}

/** The model: a call of the tool on the prompt's turn, the answer once the result is in. */
function model(kind: ModelKind) {
  return (call: Call): Script => {
    const tool = offeredTool(kind, call.json);
    const toolCall = tool && !call.body.includes(TOOL_TEXT_IN_BODY)
      ? { id: "toolu_pg_1", name: tool, argsPieces: ['{"key":', '"k7"}'] }
      : undefined;
    const script = { text: toolCall ? [] : [MCP_ANSWER], toolCall, usage: USAGE };
    const streamed = kind === "anthropic"
      ? (call.json as { stream?: boolean } | undefined)?.stream === true
      : call.path.includes(":streamGenerateContent");
    const fake = kind === "anthropic" ? anthropicFake : geminiFake;
    return streamed
      ? {
        headers: { "content-type": "text/event-stream" },
        body: fake.streamChunks(script).map((send) => ({ send })),
      }
      : {
        headers: { "content-type": "application/json" },
        body: [{ send: fake.wholeBody(script) }],
      };
  };
}

/** One run of the agent through a fresh gateway, and every check of it. */
export async function runMcpAgent(opts: {
  bin: string;
  kind: ModelKind;
  launch: (ctx: { gatewayUrl: string; home: AgentHome }) => Promise<McpAgentLaunch>;
}): Promise<void> {
  const upstream = startFakeUpstream({ fallback: model(opts.kind) });
  const tools = startFakeMcp({ name: "one", tools: ["lookup"] });
  const trap = startProxyTrap();
  const root = await Deno.makeTempDir({ prefix: "pulsegate-mcp-agent-" });
  try {
    await using gw = await startTestGateway({
      failover: { idle_timeout_secs: 3000 },
      upstreams: [{ id: "good", kind: opts.kind, base_url: upstream.url }],
      routes: ["smart", "fast"].map((route) => ({
        model: route,
        candidates: [{ upstream: "good", model: "upstream-model" }],
      })),
      keys: [{ id: "agents", key_env: KEY_ENV }],
      mcp_servers: [{ id: "one", url: tools.url }],
    }, { env: { [KEY_ENV]: MCP_AGENT_KEY } });
    const home = await makeAgentHome(root, trap);
    const launch = await opts.launch({ gatewayUrl: gw.url, home });
    const out = await runWithTimeout(opts.bin, {
      args: launch.args,
      cwd: home.work,
      env: { ...home.env, ...launch.env },
      clearEnv: true,
      timeoutMs: 90_000,
    });
    assert.ok(out, `${opts.bin} could not be started`);
    const said = `stdout:\n${firstLines(out.stdout, 20)}\nstderr:\n${firstLines(out.stderr, 20)}`;
    assert.equal(out.timedOut, false, said);
    assert.equal(out.code, 0, said);
    assert.ok(out.stdout.includes(MCP_ANSWER), said);
    assert.deepEqual(tools.calls, [{ tool: "lookup", args: { key: "k7" } }], said);
    assert.ok(
      upstream.calls.some((c) => c.body.includes(TOOL_TEXT_IN_BODY)),
      "the tool's result reached the model",
    );
    assert.ok(tools.authorizations.every((a) => a === null), "the gateway key stayed home");
    await gw.writer.flush();
    const rows = await gw.db.client.execute(
      "SELECT route, tool_server, status, outcome FROM requests WHERE client_format = 'mcp'",
    );
    assert.deepEqual(rows.rows.map((r) => [r.route, r.tool_server, r.status, r.outcome]), [
      ["one__lookup", "one", 200, "success"],
    ]);
    assert.deepEqual(trap.hits.filter((h) => !h.passedThrough), [], "no call outside");
  } finally {
    await tools.close();
    await upstream.close();
    await trap.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}
