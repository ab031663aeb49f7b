/** A throwaway home for one agent run, and an environment that points every proxy at the trap. */
import { join } from "node:path";
import type { ProxyTrap } from "./proxy_trap.ts";

export interface AgentHome {
  root: string;
  home: string;
  /** The empty project folder the agent is started in. */
  work: string;
  configHome: string;
  /** What every agent's environment starts from: nothing of the real one but PATH. */
  env: Record<string, string>;
}

/**
 * A home, config and cache folders of its own under `root`, and an environment that keeps
 * nothing of the real one but PATH: no credentials or settings of this machine leak in, and
 * every proxy variable points at the trap.
 */
export async function makeAgentHome(root: string, trap: ProxyTrap): Promise<AgentHome> {
  const home = join(root, "home");
  const work = join(root, "work");
  const configHome = join(home, ".config");
  const tmp = join(root, "tmp");
  for (const dir of [home, work, configHome, tmp]) await Deno.mkdir(dir, { recursive: true });
  const proxy = trap.url;
  return {
    root,
    home,
    work,
    configHome,
    env: {
      PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
      HOME: home,
      USER: "pulsegate-test",
      LANG: "C.UTF-8",
      TERM: "dumb",
      NO_COLOR: "1",
      TMPDIR: tmp,
      XDG_CONFIG_HOME: configHome,
      XDG_DATA_HOME: join(home, ".local", "share"),
      XDG_STATE_HOME: join(home, ".local", "state"),
      XDG_CACHE_HOME: join(home, ".cache"),
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      ALL_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      all_proxy: proxy,
      NO_PROXY: "127.0.0.1,localhost",
      no_proxy: "127.0.0.1,localhost",
    },
  };
}
