/**
 * A developer's tool beside the bench: profiles one pulsegate process under load and prints
 * where its CPU goes, so a hot-path change can be checked in a minute.
 *
 *   deno run -A bench/profile_gateway.ts [--route delay20|zero|stream64] [--history off]
 *     [--concurrency 64] [--seconds 4] [--top 25]
 */
import { DEFAULT_HOT_PATH, type HotPathOptions, profileHotPath } from "./hot_path.ts";
import { benchLayout } from "./machine.ts";
import { defaultToolsDir, ensureNodeTools } from "./npm_tools.ts";
import { startFake } from "./stack.ts";

function option(name: string): string | undefined {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] : undefined;
}

const route = option("route") ?? DEFAULT_HOT_PATH.route;
const opts: HotPathOptions = {
  route,
  stream: route === "stream64",
  history: option("history") !== "off",
  concurrency: Number(option("concurrency") ?? DEFAULT_HOT_PATH.concurrency),
  seconds: Number(option("seconds") ?? DEFAULT_HOT_PATH.seconds),
  top: Number(option("top") ?? 25),
};
const workDir = await Deno.makeTempDir({ prefix: "pulsegate-profile-" });
const layout = await benchLayout({ cpus: navigator.hardwareConcurrency, logDir: workDir });
const tools = await ensureNodeTools({ dir: defaultToolsDir(), installPortkey: false });
const fake = await startFake(layout);
try {
  const log = (message: string) => console.error(message);
  const hot = await profileHotPath({ tools, layout, fake: fake.url, workDir, log }, opts);
  if (!hot) Deno.exit(1);
  console.log(`${hot.rps} req/s, ${JSON.stringify(opts)}`);
  for (const h of hot.byFunction) {
    console.log(`${h.selfPercent.toFixed(1).padStart(5)} %  ${h.name}`);
  }
  console.log("");
  for (const h of hot.byFile) console.log(`${h.selfPercent.toFixed(1).padStart(5)} %  ${h.name}`);
} finally {
  await fake.stop();
  await Deno.remove(workDir, { recursive: true });
}
