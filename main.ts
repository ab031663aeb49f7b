import { ConfigFileError, startGateway } from "./gateway/start_gateway.ts";
import { driveDemoTraffic } from "./gateway/demo/demo_traffic.ts";
import { readSettings } from "./gateway/settings.ts";

/** Wires the process: settings from env, the gateway, and signals for a graceful stop. */
async function main(): Promise<void> {
  const env = (name: string) => Deno.env.get(name);
  const settings = readSettings(env);
  let gateway;
  try {
    gateway = await startGateway({ settings, env });
  } catch (err) {
    if (err instanceof ConfigFileError || err instanceof Deno.errors.NotCapable) {
      console.error(`pulsegate: ${err.message}`);
      Deno.exit(1);
    }
    throw err;
  }
  console.error(`pulsegate listening on ${gateway.url} (admin: ${gateway.url}/admin)`);
  const stop = async () => {
    await gateway.shutdown();
    Deno.exit(0);
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  if (Deno.args.includes("--demo")) await driveDemoTraffic(gateway.url);
}

if (import.meta.main) await main();
