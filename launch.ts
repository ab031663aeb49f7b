import { allowList, settingPaths, ungrantable } from "./gateway/start/setting_paths.ts";

/**
 * `deno task start`: runs main.ts with file access limited to data/ and the paths the settings
 * name (PULSEGATE_CONFIG read-only, the database file's folder read-write), so the config and
 * database may live anywhere without granting the gateway the whole disk.
 */
async function launch(): Promise<number> {
  const env = (name: string) => Deno.env.get(name);
  const problem = ungrantable(env);
  if (problem) {
    console.error(`pulsegate: ${problem}`);
    return 1;
  }
  const paths = settingPaths(env);
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      // The server's own import map and lockfile: a first start fetches only what main.ts needs,
      // never the SDKs and browser driver the tests use (docs/deploy.md).
      "--config",
      new URL("./deno.server.json", import.meta.url).pathname,
      "--allow-net",
      "--allow-env",
      `--allow-read=${allowList(paths.read)}`,
      `--allow-write=${allowList(paths.write)}`,
      "--allow-ffi",
      "--allow-sys",
      // Guardrail rules run in a child `deno` that can be killed mid-rule (docs/security.md).
      `--allow-run=${Deno.execPath()}`,
      new URL("./main.ts", import.meta.url).pathname,
      ...Deno.args,
    ],
    stdin: "inherit",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  // The gateway owns shutdown (docs/design.md "Settings"): pass the signal on and wait for its exit code.
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    Deno.addSignalListener(signal, () => {
      try {
        child.kill(signal);
      } catch { /* already gone */ }
    });
  }
  const status = await child.status;
  return status.signal ? 128 + signalNumber(status.signal) : status.code;
}

function signalNumber(signal: Deno.Signal): number {
  return signal === "SIGINT" ? 2 : signal === "SIGKILL" ? 9 : 15;
}

if (import.meta.main) Deno.exit(await launch());
