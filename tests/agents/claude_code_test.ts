/**
 * Claude Code (`claude -p`) through the gateway: it speaks Anthropic Messages with the gateway
 * key as its API key, its main model set to the route and its small model to a side route.
 */
import { type LaunchContext, registerAgentTests } from "./agent_kit.ts";

const env = (ctx: LaunchContext) => ({
  ANTHROPIC_BASE_URL: ctx.gatewayUrl,
  ANTHROPIC_API_KEY: ctx.key,
  ANTHROPIC_DEFAULT_HAIKU_MODEL: "fast",
  ANTHROPIC_SMALL_FAST_MODEL: "fast",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  DISABLE_AUTOUPDATER: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: "1",
});

await registerAgentTests({
  name: "claude-code",
  sameKind: "anthropic",
  translatedKind: "openai-chat",
  sideModels: ["fast"],
  launch(ctx) {
    return Promise.resolve({ args: ["-p", ctx.prompt, "--model", ctx.route], env: env(ctx) });
  },
  // Its session id is the conversation's, which `--resume` continues.
  resume: (ctx, session) => ({
    args: ["-p", ctx.prompt, "--model", ctx.route, "--resume", session],
    env: env(ctx),
  }),
});
