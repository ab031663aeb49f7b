/**
 * Claude Code (`claude -p --mcp-config`) lists and calls a tool through pulsegate's /mcp
 * (tests/agents/mcp_agent_kit.ts). Skipped loudly when the agent cannot run here.
 */
import { checkAgent, installAgents } from "./install_agents.ts";
import { MCP_AGENT_KEY, MCP_PROMPT, runMcpAgent } from "./mcp_agent_kit.ts";

const install = await installAgents();
const agent = await checkAgent(install, "claude-code");
if (!agent.ok) console.log(`SKIPPED: claude-code:mcp: ${agent.reason}`);

Deno.test({
  name: "claude-code:mcp: lists and calls a tool through /mcp; the result reaches the model",
  ignore: !agent.ok,
  async fn() {
    if (!agent.ok) return;
    await runMcpAgent({
      bin: agent.bin,
      kind: "anthropic",
      async launch({ gatewayUrl, home }) {
        const config = `${home.work}/mcp.json`;
        await Deno.writeTextFile(
          config,
          JSON.stringify({
            mcpServers: {
              pulsegate: {
                type: "http",
                url: `${gatewayUrl}/mcp`,
                headers: { Authorization: `Bearer ${MCP_AGENT_KEY}` },
              },
            },
          }),
        );
        return {
          // Claude Code names the tool `mcp__<server>__<tool>`.
          args: [
            "-p",
            MCP_PROMPT,
            "--model",
            "smart",
            "--mcp-config",
            config,
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__pulsegate__one__lookup",
          ],
          env: {
            ANTHROPIC_BASE_URL: gatewayUrl,
            ANTHROPIC_API_KEY: MCP_AGENT_KEY,
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
        };
      },
    });
  },
});
