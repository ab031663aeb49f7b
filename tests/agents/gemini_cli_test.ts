/**
 * Gemini CLI (`gemini -p`) through the gateway: Gemini API-key auth at GOOGLE_GEMINI_BASE_URL with
 * the gateway key as GEMINI_API_KEY, usage statistics, telemetry and updates off in its settings.
 */
import { join } from "node:path";
import { type AgentLaunch, type LaunchContext, registerAgentTests } from "./agent_kit.ts";

/** Gemini CLI names no session of its own; an operator's session abort needs one. */
const SESSION = "gemini-cli-agent-session";

function run(ctx: LaunchContext, session = SESSION): AgentLaunch {
  return {
    args: ["-p", ctx.prompt, "-m", ctx.route, "--skip-trust"],
    env: {
      GOOGLE_GEMINI_BASE_URL: ctx.gatewayUrl,
      GEMINI_API_KEY: ctx.key,
      GEMINI_CLI_CUSTOM_HEADERS: `x-session-id: ${session}`,
    },
  };
}

const SETTINGS = {
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  security: { auth: { selectedType: "gemini-api-key" } },
};

await registerAgentTests({
  name: "gemini-cli",
  sameKind: "gemini",
  translatedKind: "openai-chat",
  async launch(ctx) {
    const dir = join(ctx.home.home, ".gemini");
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(join(dir, "settings.json"), JSON.stringify(SETTINGS, null, 2));
    return run(ctx);
  },
  // The session is the header its environment names: the same launch is the same session.
  resume: (ctx, session) => run(ctx, session),
});
