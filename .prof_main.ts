import { startGateway } from "./gateway/start_gateway.ts";
import { readSettings } from "./gateway/settings.ts";
const env = (n: string) => Deno.env.get(n);
await startGateway({ settings: readSettings(env), env, quiet: true });
setTimeout(() => Deno.exit(0), Number(Deno.env.get("EXIT_AFTER")));
