import { ConfigFileError, startGateway } from "./gateway/start/start_gateway.ts";
import { driveDemoTraffic } from "./gateway/demo/demo_traffic.ts";
import { readSettings } from "./gateway/start/settings.ts";
import { SettingPathError } from "./gateway/start/setting_paths.ts";

/** Wires the process: settings from env, the gateway, and signals for a graceful stop. */
async function main(): Promise<void> {
  const env = (name: string) => Deno.env.get(name);
  const settings = readSettings(env);
  // Listened for before the gateway listens: Deno's signal handling takes a descriptor the first
  // time, and a connection flood may leave none (docs/deploy.md "Connection limits"). A signal
  // during the start has nothing to drain yet: it ends the process as the signal would have.
  let stop = (signal: "SIGTERM" | "SIGINT"): void => {
    Deno.exit(signal === "SIGINT" ? 130 : 143);
  };
  Deno.addSignalListener("SIGTERM", () => stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stop("SIGINT"));
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
  const shutDown = (code: number) => {
    stopping ??= gateway.shutdown().then(() => Deno.exit(code));
  };
  stop = () => shutDown(0);
  // Only plain Deno.serve (docs/deploy.md "Connection limits") can stop accepting for good: let
  // the requests in flight finish and their rows close, then exit non-zero for the supervisor.
  void gateway.lost.then(() => shutDown(1));
  if (Deno.args.includes("--demo")) await driveDemoTraffic(gateway.url);
}

if (import.meta.main) await main();
