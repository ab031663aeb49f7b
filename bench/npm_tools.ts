/**
 * The Node tools the bench runs beside the gateway: autocannon (the load generator) and the
 * Portkey gateway (the peer). They are installed with npm into a cache directory outside the
 * repository, once, and reused by later runs; nothing of theirs is imported by Deno.
 */

/** Pinned, so a rerun measures the same peer and the same load generator. */
export const AUTOCANNON = "autocannon@8.0.0";
export const PORTKEY = "@portkey-ai/gateway@1.15.2";

export interface NodeTools {
  dir: string;
  node: string;
  /** Path of autocannon's CLI script, or null with the reason it could not be had. */
  autocannon: string | null;
  portkey: string | null;
  problems: string[];
}

export function defaultToolsDir(): string {
  const explicit = Deno.env.get("PULSEGATE_BENCH_TOOLS");
  if (explicit) return explicit;
  const cache = Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? "/tmp"}/.cache`;
  return `${cache}/pulsegate-bench`;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function installed(dir: string, pkg: string): Promise<boolean> {
  const name = pkg.slice(0, pkg.lastIndexOf("@"));
  const version = pkg.slice(pkg.lastIndexOf("@") + 1);
  try {
    const manifest = JSON.parse(
      await Deno.readTextFile(`${dir}/node_modules/${name}/package.json`),
    ) as { version?: string };
    return manifest.version === version;
  } catch {
    return false;
  }
}

async function npmInstall(dir: string, pkgs: string[]): Promise<string | null> {
  await Deno.mkdir(dir, { recursive: true });
  if (!await exists(`${dir}/package.json`)) {
    await Deno.writeTextFile(`${dir}/package.json`, '{ "private": true }\n');
  }
  try {
    const out = await new Deno.Command("npm", {
      args: ["install", "--no-audit", "--no-fund", "--loglevel=error", ...pkgs],
      cwd: dir,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(180_000),
    }).output();
    if (out.success) return null;
    return new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join(" ");
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * Installs what is missing and says what is usable. Portkey is installed only when
 * `installPortkey`, but used whenever it is there already.
 */
export async function ensureNodeTools(
  opts: { dir: string; installPortkey: boolean },
): Promise<NodeTools> {
  const problems: string[] = [];
  const wanted = opts.installPortkey ? [AUTOCANNON, PORTKEY] : [AUTOCANNON];
  const missing: string[] = [];
  for (const pkg of wanted) {
    if (!await installed(opts.dir, pkg)) missing.push(pkg);
  }
  if (missing.length) {
    const failed = await npmInstall(opts.dir, missing);
    if (failed) problems.push(`npm install ${missing.join(" ")} failed: ${failed}`);
  }
  const autocannon = `${opts.dir}/node_modules/autocannon/autocannon.js`;
  const portkey = `${opts.dir}/node_modules/@portkey-ai/gateway/build/start-server.js`;
  return {
    dir: opts.dir,
    node: "node",
    autocannon: await installed(opts.dir, AUTOCANNON) ? autocannon : null,
    portkey: await installed(opts.dir, PORTKEY) ? portkey : null,
    problems,
  };
}
