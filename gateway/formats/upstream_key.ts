import type { UpstreamCall } from "./format.ts";

/**
 * The upstream's API key, read from the environment variable its config names
 * (config stores the name, never the key); undefined when it names none.
 */
export function upstreamKey(call: Pick<UpstreamCall, "upstream" | "env">): string | undefined {
  const { upstream } = call;
  return "api_key_env" in upstream && upstream.api_key_env
    ? call.env(upstream.api_key_env)
    : undefined;
}
