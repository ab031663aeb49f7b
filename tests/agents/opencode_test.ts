/**
 * opencode (`opencode run`) through the gateway: a custom OpenAI-compatible (Chat Completions)
 * provider in a throwaway XDG config, its title model on a side route, updates, model catalog
 * fetches, sharing and the default plugins off.
 */
import { join } from "node:path";
import { type LaunchContext, registerAgentTests } from "./agent_kit.ts";

const env = (ctx: LaunchContext) => ({
  PULSEGATE_API_KEY: ctx.key,
  OPENCODE_DISABLE_AUTOUPDATE: "1",
  OPENCODE_DISABLE_MODELS_FETCH: "1",
  OPENCODE_DISABLE_SHARE: "1",
  OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
  OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
});

await registerAgentTests({
  name: "opencode",
  sameKind: "openai-chat",
  translatedKind: "gemini",
  sideModels: ["fast"],
  toleratedHosts: {
    "registry.npmjs.org": "opencode installs @opencode-ai/plugin into every config folder in " +
      "the background at start; a failure is only a logged warning",
  },
  async launch(ctx) {
    const dir = join(ctx.home.configHome, "opencode");
    await Deno.mkdir(dir, { recursive: true });
    const config = {
      autoupdate: false,
      share: "disabled",
      model: `pulsegate/${ctx.route}`,
      small_model: "pulsegate/fast",
      provider: {
        pulsegate: {
          npm: "@ai-sdk/openai-compatible",
          name: "pulsegate",
          options: { baseURL: `${ctx.gatewayUrl}/v1`, apiKey: "{env:PULSEGATE_API_KEY}" },
          models: { [ctx.route]: { name: ctx.route }, fast: { name: "fast" } },
        },
      },
    };
    await Deno.writeTextFile(join(dir, "opencode.json"), JSON.stringify(config, null, 2));
    return { args: ["run", "--model", `pulsegate/${ctx.route}`, ctx.prompt], env: env(ctx) };
  },
  // Its `x-session-id` header is its session's id, which `--session` continues.
  resume: (ctx, session) => ({
    args: ["run", "--model", `pulsegate/${ctx.route}`, "--session", session, ctx.prompt],
    env: env(ctx),
  }),
});
