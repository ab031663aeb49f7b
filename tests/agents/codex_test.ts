/**
 * Codex (`codex exec`) through the gateway: a custom model provider in a throwaway CODEX_HOME
 * speaking the Responses API, the gateway key in the env var the provider names. Plugins are off:
 * with them on, every start syncs a plugin catalog from GitHub and chatgpt.com.
 */
import { join } from "node:path";
import { registerAgentTests } from "./agent_kit.ts";

await registerAgentTests({
  name: "codex",
  sameKind: "openai-responses",
  translatedKind: "anthropic",
  async launch(ctx) {
    const codexHome = join(ctx.home.home, ".codex");
    await Deno.mkdir(codexHome, { recursive: true });
    await Deno.writeTextFile(
      join(codexHome, "config.toml"),
      `model = "${ctx.route}"
model_provider = "pulsegate"
check_for_update_on_startup = false
approval_policy = "never"
sandbox_mode = "read-only"

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false

[model_providers.pulsegate]
name = "pulsegate"
base_url = "${ctx.gatewayUrl}/v1"
env_key = "PULSEGATE_API_KEY"
wire_api = "responses"
`,
    );
    return {
      args: ["exec", "--skip-git-repo-check", ctx.prompt],
      env: { CODEX_HOME: codexHome, PULSEGATE_API_KEY: ctx.key },
    };
  },
  // Its `session-id` header is the thread's id, which `exec resume` continues.
  resume: (ctx, session) => ({
    args: ["exec", "resume", "--skip-git-repo-check", session, ctx.prompt],
    env: { CODEX_HOME: join(ctx.home.home, ".codex"), PULSEGATE_API_KEY: ctx.key },
  }),
});
