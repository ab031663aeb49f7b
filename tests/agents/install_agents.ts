/**
 * Installs the pinned coding agents from the npm registry into a cache folder outside the
 * checkout, once per set of versions, and tells which of them can run here. An agent the
 * registry refuses or that cannot start on this machine is reported with the reason, so its
 * tests skip loudly instead of failing CI.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runWithTimeout } from "./run_command.ts";

export type AgentName = "claude-code" | "codex" | "gemini-cli" | "opencode";

export interface AgentPackage {
  name: AgentName;
  pkg: string;
  version: string;
  /** The command the package puts in node_modules/.bin. */
  bin: string;
}

export const AGENT_PACKAGES: readonly AgentPackage[] = [
  { name: "claude-code", pkg: "@anthropic-ai/claude-code", version: "2.1.332", bin: "claude" },
  { name: "codex", pkg: "@openai/codex", version: "0.171.0", bin: "codex" },
  { name: "gemini-cli", pkg: "@google/gemini-cli", version: "0.61.0", bin: "gemini" },
  { name: "opencode", pkg: "opencode-ai", version: "1.18.33", bin: "opencode" },
];

export type AgentInstallResult =
  | { name: AgentName; ok: true; bin: string; version: string }
  | { name: AgentName; ok: false; reason: string };

export interface AgentInstall {
  root: string;
  /** Each agent's folder, or why npm could not fill it. */
  agents: Record<AgentName, { dir: string } | { reason: string }>;
  /** Seconds spent in npm this time (0 when every agent came from the cache). */
  installSecs: number;
  sizeBytes: number;
}

const NPM_TIMEOUT_MS = 180_000;
/** How long a failed install is believed before npm is asked again. */
const FAILURE_MEMORY_MS = 30 * 60_000;
const FAILED_SUFFIX = ".failed";
const VERSION_TIMEOUT_MS = 60_000;
/** Written last into an agent's folder: a folder without it is a broken install. */
const DONE_MARKER = ".pulsegate-installed";

/** `$PULSEGATE_AGENTS_DIR`, or a folder under the temp dir named by the pinned versions. */
export async function agentsRoot(): Promise<string> {
  const fromEnv = Deno.env.get("PULSEGATE_AGENTS_DIR");
  if (fromEnv) return fromEnv;
  const pins = JSON.stringify([AGENT_PACKAGES, Deno.build.os, Deno.build.arch]);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(pins));
  const hash = [...new Uint8Array(digest)].slice(0, 6)
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  return join(tmpdir(), "pulsegate-agents", hash);
}

/**
 * Installs every pinned agent that is missing, one at a time (the machine has two cores): the
 * first agent test to run pays for all of them, so the install time is one figure.
 */
export async function installAgents(): Promise<AgentInstall> {
  const root = await agentsRoot();
  await Deno.mkdir(root, { recursive: true });
  const started = performance.now();
  let installed = false;
  const agents = {} as AgentInstall["agents"];
  for (const agent of AGENT_PACKAGES) {
    const dir = join(root, agent.name);
    if (!(await exists(join(dir, DONE_MARKER)))) {
      const failure = await recentFailure(dir) ?? await npmInstall(agent, dir);
      installed ||= failure === null;
      if (failure) {
        agents[agent.name] = { reason: failure };
        continue;
      }
    }
    agents[agent.name] = { dir };
  }
  return {
    root,
    agents,
    installSecs: installed ? (performance.now() - started) / 1000 : 0,
    sizeBytes: await diskUsage(root),
  };
}

/**
 * A failure noted by an earlier test file of the same run: each file loads this module afresh,
 * and a registry that refuses or hangs should cost the suite one attempt, not one per file.
 */
async function recentFailure(dir: string): Promise<string | null> {
  const note = await Deno.stat(`${dir}${FAILED_SUFFIX}`).catch(() => null);
  if (!note?.mtime || Date.now() - note.mtime.getTime() > FAILURE_MEMORY_MS) return null;
  return await Deno.readTextFile(`${dir}${FAILED_SUFFIX}`).catch(() => null);
}

/** Installs into a fresh sibling folder, then renames it into place: a concurrent or killed
 * install never leaves a half-filled folder that looks complete. Returns the failure, if any. */
async function npmInstall(agent: AgentPackage, dir: string): Promise<string | null> {
  const failure = await npmInstallOnce(agent, dir);
  if (failure) await Deno.writeTextFile(`${dir}${FAILED_SUFFIX}`, failure);
  else await Deno.remove(`${dir}${FAILED_SUFFIX}`).catch(() => {});
  return failure;
}

async function npmInstallOnce(agent: AgentPackage, dir: string): Promise<string | null> {
  const staging = `${dir}.staging-${crypto.randomUUID().slice(0, 8)}`;
  await Deno.mkdir(staging, { recursive: true });
  try {
    await Deno.writeTextFile(join(staging, "package.json"), '{"private": true}\n');
    const spec = `${agent.pkg}@${agent.version}`;
    const out = await runWithTimeout("npm", {
      args: ["install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact", spec],
      cwd: staging,
      env: { npm_config_update_notifier: "false" },
      timeoutMs: NPM_TIMEOUT_MS,
    });
    if (out === null) return `npm install ${spec} could not start: is npm on PATH?`;
    if (out.timedOut) return `npm install ${spec} took over ${NPM_TIMEOUT_MS / 1000} s`;
    if (out.code !== 0) {
      return `npm install ${spec} failed (exit ${out.code}): ${npmError(out.stderr)}`;
    }
    await Deno.writeTextFile(join(staging, DONE_MARKER), `${spec}\n`);
    // A folder without the marker is what a killed install left.
    if (!(await exists(join(dir, DONE_MARKER)))) {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
    await Deno.rename(staging, dir).catch(async (e) => {
      // Another test process finished the same install first: keep its copy.
      if (!(await exists(join(dir, DONE_MARKER)))) throw e;
    });
    return null;
  } finally {
    await Deno.remove(staging, { recursive: true }).catch(() => {});
  }
}

/** Whether one installed agent starts here, or why not. */
export function checkAgent(install: AgentInstall, name: AgentName): Promise<AgentInstallResult> {
  const agent = AGENT_PACKAGES.find((a) => a.name === name)!;
  const where = install.agents[name];
  if ("reason" in where) return Promise.resolve({ name, ok: false, reason: where.reason });
  return checkRuns(agent, where.dir);
}

/** Runs `<bin> --version` in a throwaway home: the native binaries or a too-old Node show here. */
async function checkRuns(agent: AgentPackage, dir: string): Promise<AgentInstallResult> {
  const bin = join(dir, "node_modules", ".bin", agent.bin);
  if (!(await exists(bin))) {
    return {
      name: agent.name,
      ok: false,
      reason: `${agent.pkg} installed no ${agent.bin} command`,
    };
  }
  const home = await Deno.makeTempDir({ prefix: "pulsegate-agent-version-" });
  try {
    const out = await runWithTimeout(bin, {
      args: ["--version"],
      cwd: home,
      env: { HOME: home, XDG_CONFIG_HOME: join(home, ".config"), CODEX_HOME: join(home, ".codex") },
      timeoutMs: VERSION_TIMEOUT_MS,
    });
    const said = out ? `${out.stdout}${out.stderr}` : "";
    if (!out || out.code !== 0 || !said.includes(agent.version)) {
      const how = out ? `exit ${out.code}${out.timedOut ? " (timed out)" : ""}` : "cannot spawn";
      return {
        name: agent.name,
        ok: false,
        reason: `${agent.bin} --version does not run here (${how}): ${lastLines(said, 5)}`,
      };
    }
    return { name: agent.name, ok: true, bin, version: agent.version };
  } finally {
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

/** npm's first error lines (its code and message), without the stack and the log hint. */
function npmError(stderr: string): string {
  const lines = stderr.split("\n").filter((l) =>
    l.startsWith("npm error") && !/^npm error\s+at /.test(l)
  );
  return (lines.length ? lines.slice(0, 4) : [lastLines(stderr, 4)]).join(" | ");
}

export function lastLines(text: string, n: number): string {
  return text.trim().split("\n").slice(-n).join("\n");
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** Bytes on disk, each hard-linked file counted once (Claude Code links its 400 MB binary). */
async function diskUsage(root: string): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const walk = async (dir: string) => {
    for await (const entry of Deno.readDir(dir)) {
      const path = join(dir, entry.name);
      const info = await Deno.lstat(path).catch(() => null);
      if (!info) continue;
      if (entry.isDirectory) await walk(path);
      else if (!seen.has(`${info.dev}:${info.ino}`)) {
        seen.add(`${info.dev}:${info.ino}`);
        total += info.size;
      }
    }
  };
  await walk(root);
  return total;
}
