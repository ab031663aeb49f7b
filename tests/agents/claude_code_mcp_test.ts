/**
 * Claude Code (`claude -p --mcp-config`) lists and calls a tool through pulsegate's /mcp: its
 * model, a fake Anthropic upstream behind the gateway, asks for the tool; Claude Code calls it
 * through the gateway (the tool server is the SDK-built fake), and the model's next turn carries
 * the tool's result. Skipped loudly when the agent cannot run here, as the other agent tests.
 */
import assert from "node:assert/strict";
import type { Call } from "../fake_upstreams/server.ts";
import { startFakeUpstream } from "../fake_upstreams/server.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import { startTestGateway } from "../harness.ts";
import { startFakeMcp } from "../fake_mcp/sdk_server.ts";
import { checkAgent, installAgents } from "./install_agents.ts";
import { makeAgentHome } from "./agent_home.ts";
import { startProxyTrap } from "./proxy_trap.ts";
import { runWithTimeout } from "./run_command.ts";
import { firstLines } from "./run_report.ts";

const KEY = "pg-agent-test-key-0123456789";
const KEY_ENV = "PULSEGATE_KEY_AGENT_TEST";
const PROMPT = "Look up the key k7 with the lookup tool and reply with what it says.";
/** Claude Code names an MCP tool `mcp__<server>__<tool>`; the gateway's tool is `one__lookup`. */
const TOOL = "mcp__pulsegate__one__lookup";
const TOOL_TEXT = 'one:lookup:{"key":"k7"}';
/** The tool's text as it stands in a request body: inside a JSON string, quotes escaped. */
const TOOL_TEXT_IN_BODY = JSON.stringify(TOOL_TEXT).slice(1, -1);
const ANSWER = "Pulsegate MCP answer: 4217.";
const USAGE = { input: 1200, output: 12 };

/** The model: a tool call for the prompt's turn, the answer once the tool's result is in. */
function model(call: Call) {
  const json = call.json as { stream?: boolean; tools?: { name: string }[] } | undefined;
  const offersTool = json?.tools?.some((t) => t.name === TOOL) ?? false;
  const script: anthropicFake.AnthropicScript = offersTool && !call.body.includes(TOOL_TEXT_IN_BODY)
    ? {
      text: [],
      toolCall: { id: "toolu_pg_1", name: TOOL, argsPieces: ['{"key":', '"k7"}'] },
      usage: USAGE,
    }
    : { text: [ANSWER], usage: USAGE };
  return json?.stream
    ? {
      headers: { "content-type": "text/event-stream" },
      body: anthropicFake.streamChunks(script).map((send) => ({ send })),
    }
    : {
      headers: { "content-type": "application/json" },
      body: [{ send: anthropicFake.wholeBody(script) }],
    };
}

const install = await installAgents();
const agent = await checkAgent(install, "claude-code");
if (!agent.ok) console.log(`SKIPPED: claude-code:mcp: ${agent.reason}`);

Deno.test({
  name: "claude-code:mcp: lists and calls a tool through /mcp; the result reaches the model",
  ignore: !agent.ok,
  async fn() {
    if (!agent.ok) return;
    const upstream = startFakeUpstream({ fallback: model });
    const tools = startFakeMcp({ name: "one", tools: ["lookup"] });
    const trap = startProxyTrap();
    const root = await Deno.makeTempDir({ prefix: "pulsegate-claude-mcp-" });
    try {
      await using gw = await startTestGateway({
        failover: { idle_timeout_secs: 3000 },
        upstreams: [{ id: "good", kind: "anthropic", base_url: upstream.url }],
        routes: ["smart", "fast"].map((route) => ({
          model: route,
          candidates: [{ upstream: "good", model: "upstream-model" }],
        })),
        keys: [{ id: "agents", key_env: KEY_ENV }],
        mcp_servers: [{ id: "one", url: tools.url }],
      }, { env: { [KEY_ENV]: KEY } });
      const home = await makeAgentHome(root, trap);
      const mcpConfig = `${home.work}/mcp.json`;
      await Deno.writeTextFile(
        mcpConfig,
        JSON.stringify({
          mcpServers: {
            pulsegate: {
              type: "http",
              url: `${gw.url}/mcp`,
              headers: { Authorization: `Bearer ${KEY}` },
            },
          },
        }),
      );
      const args = [
        "-p",
        PROMPT,
        "--model",
        "smart",
        "--mcp-config",
        mcpConfig,
        "--strict-mcp-config",
        "--allowedTools",
        TOOL,
      ];
      const out = await runWithTimeout(agent.bin, {
        args,
        cwd: home.work,
        env: {
          ...home.env,
          ANTHROPIC_BASE_URL: gw.url,
          ANTHROPIC_API_KEY: KEY,
          ANTHROPIC_DEFAULT_HAIKU_MODEL: "fast",
          ANTHROPIC_SMALL_FAST_MODEL: "fast",
          DISABLE_TELEMETRY: "1",
          DISABLE_ERROR_REPORTING: "1",
          DISABLE_AUTOUPDATER: "1",
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
          CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: "1",
          // MCP tools offered to the model as they are, not behind its ToolSearch tool.
          ENABLE_TOOL_SEARCH: "false",
        },
        clearEnv: true,
        timeoutMs: 90_000,
      });
      assert.ok(out, "claude could not be started");
      const said = `stdout:\n${firstLines(out.stdout, 20)}\nstderr:\n${firstLines(out.stderr, 20)}`;
      assert.equal(out.timedOut, false, said);
      assert.equal(out.code, 0, said);
      assert.ok(out.stdout.includes(ANSWER), said);
      assert.deepEqual(tools.calls, [{ tool: "lookup", args: { key: "k7" } }]);
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
  },
});
