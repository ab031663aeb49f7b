/**
 * A developer's tool beside the bench: profiles one pulsegate process under load and prints
 * where its CPU goes, so a hot-path change can be checked in a minute.
 *
 *   deno run -A bench/profile_gateway.ts [--route delay20|zero|stream64|stream8] [--history off]
 *     [--concurrency 64] [--seconds 4] [--top 25] [--alloc-bytes 8] [--no-alloc] [--no-cpu]
 *
 * Then, on a second fresh gateway under the same load, what one request allocates on the serving
 * thread (objects and bytes, and the sites that allocate most), from V8's sampling heap
 * profiler with collected objects included (bench/alloc_profile.ts): one sample per
 * `--alloc-bytes` allocated on average, so the figures are estimates whose grain the sample count
 * printed beside them gives. Run it in two checkouts (e.g. `git archive main | tar -x -C DIR`)
 * for allocations before → after. The history writer's worker thread is not in it.
 */
import {
  DEFAULT_HOT_PATH,
  type HotPathOptions,
  profileAllocations,
  profileHotPath,
} from "./hot_path.ts";
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
  stream: route.startsWith("stream"),
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
  const env = { tools, layout, fake: fake.url, workDir, log };
  if (!Deno.args.includes("--no-cpu")) {
    const hot = await profileHotPath(env, opts);
    if (!hot) Deno.exit(1);
    console.log(`${hot.rps} req/s, ${JSON.stringify(opts)}`);
    for (const h of hot.byFunction) {
      console.log(`${h.selfPercent.toFixed(1).padStart(5)} %  ${h.name}`);
    }
    console.log("");
    for (const h of hot.byFile) {
      console.log(`${h.selfPercent.toFixed(1).padStart(5)} %  ${h.name}`);
    }
  }
  if (!Deno.args.includes("--no-alloc")) {
    const intervalBytes = Number(option("alloc-bytes") ?? "8");
    const alloc = await profileAllocations(env, { ...opts, intervalBytes });
    if (!alloc) Deno.exit(1);
    console.log(
      `\nallocations per request (${alloc.route}): ${alloc.objectsPerRequest} objects, ` +
        `${alloc.bytesPerRequest} bytes (estimated from ${alloc.samples} samples, one per ` +
        `${alloc.intervalBytes} bytes, over ${alloc.requests} requests at ${alloc.rps} req/s ` +
        "under the sampler)",
    );
    for (const site of alloc.sites) {
      console.log(
        `${site.objects.toFixed(2).padStart(8)} objects ${String(site.bytes).padStart(7)} B  ` +
          site.name,
      );
    }
  }
} finally {
  await fake.stop();
  await Deno.remove(workDir, { recursive: true });
}
