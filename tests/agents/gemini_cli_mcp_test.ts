/**
 * Gemini CLI (`gemini -p`, an `httpUrl` MCP server in its settings) lists and calls a tool
 * through pulsegate's /mcp (tests/agents/mcp_agent_kit.ts). Skipped loudly when the agent cannot
 * run here.
 */
import { join } from "node:path";
import { checkAgent, installAgents } from "./install_agents.ts";
import { MCP_AGENT_KEY, MCP_PROMPT, runMcpAgent } from "./mcp_agent_kit.ts";

const install = await installAgents();
const agent = await checkAgent(install, "gemini-cli");
if (!agent.ok) console.log(`SKIPPED: gemini-cli:mcp: ${agent.reason}`);

Deno.test({
  name: "gemini-cli:mcp: lists and calls a tool through /mcp; the result reaches the model",
  ignore: !agent.ok,
  async fn() {
    if (!agent.ok) return;
    await runMcpAgent({
      bin: agent.bin,
      kind: "gemini",
      async launch({ gatewayUrl, home }) {
        const dir = join(home.home, ".gemini");
        await Deno.mkdir(dir, { recursive: true });
        await Deno.writeTextFile(
          join(dir, "settings.json"),
          JSON.stringify({
            general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
            privacy: { usageStatisticsEnabled: false },
            telemetry: { enabled: false },
            security: { auth: { selectedType: "gemini-api-key" } },
            mcpServers: {
              pulsegate: {
                httpUrl: `${gatewayUrl}/mcp`,
                headers: { Authorization: `Bearer ${MCP_AGENT_KEY}` },
                // Its tools run without asking, as --yolo would let every tool.
                trust: true,
              },
            },
          }),
        );
        return {
          args: ["-p", MCP_PROMPT, "-m", "smart", "--skip-trust"],
          env: { GOOGLE_GEMINI_BASE_URL: gatewayUrl, GEMINI_API_KEY: MCP_AGENT_KEY },
        };
      },
    });
  },
});
