import { ConfigFileError, startGateway } from "./gateway/start_gateway.ts";
import { driveDemoTraffic } from "./gateway/demo/demo_traffic.ts";
import { readSettings } from "./gateway/settings.ts";
import { SettingPathError } from "./gateway/setting_paths.ts";

/** Wires the process: settings from env, the gateway, and signals for a graceful stop. */
async function main(): Promise<void> {
  const env = (name: string) => Deno.env.get(name);
  const settings = readSettings(env);
  let gateway;
  try {
    gateway = await startGateway({ settings, env });
  } catch (err) {
    if (
      err instanceof ConfigFileError || err instanceof SettingPathError ||
      err instanceof Deno.errors.NotCapable
    ) {
      console.error(`pulsegate: ${err.message}`);
      Deno.exit(1);
    }
    throw err;
  }
  console.error(`pulsegate listening on ${gateway.url} (admin: ${gateway.url}/admin)`);
  // `deno task start` passes a signal on, and a terminal's Ctrl-C reaches the whole process
  // group too: the gateway may hear one stop several times and must shut down once.
  let stopping: Promise<void> | undefined;
  const stop = (code = 0) => {
    stopping ??= gateway.shutdown().then(() => Deno.exit(code));
  };
  Deno.addSignalListener("SIGTERM", () => stop());
  Deno.addSignalListener("SIGINT", () => stop());
  // Only plain Deno.serve (docs/deploy.md "Connection limits") can stop accepting for good: let
  // the requests in flight finish and their rows close, then exit non-zero for the supervisor.
  void gateway.lost.then(() => stop(1));
  if (Deno.args.includes("--demo")) await driveDemoTraffic(gateway.url);
}

if (import.meta.main) await main();
