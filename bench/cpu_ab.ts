/**
 * A developer's tool beside the bench: CPU per streamed delta and per whole answer of the floor,
 * the JS relay floor (floor_proxy.ts with BENCH_FLOOR_MODE=js) and one or two pulsegate trees,
 * measured in alternating repetitions on one shared fake, so a hot-path change is judged by CPU
 * time (not wall-clock, which neighbours make noisy) and by its spread over the repetitions.
 *
 *   deno run -A bench/cpu_ab.ts [--base /path/to/other/checkout] [--reps 3] [--streams 128] [--rounds 2]
 *     [--seconds 2] [--concurrency 16]
 *
 * `--v8 FLAGS` starts this tree's gateway with `--v8-flags=FLAGS` (the base without), to judge a
 * V8 setting the same way.
 *
 * `--base` runs that checkout's gateway (its bench/gateway_entry.ts) as a second target, e.g.
 * `git archive main | tar -x -C /tmp/base`, for a before/after in the same conditions.
 */
import { benchLayout } from "./machine.ts";
import { defaultToolsDir, ensureNodeTools } from "./npm_tools.ts";
import { Service } from "./services.ts";
import { MAIN_ROUTES, REPO_ROOT, startFake, startFloor } from "./stack.ts";
import { gatewayConfig } from "./targets.ts";
import { measureCpu, spreadOf } from "./scenarios/cpu_cost.ts";

function option(name: string, fallback: string): string {
  const at = Deno.args.indexOf(`--${name}`);
  return at >= 0 ? Deno.args[at + 1] ?? fallback : fallback;
}

const reps = Number(option("reps", "3"));
const streams = Number(option("streams", "128"));
const rounds = Number(option("rounds", "2"));
const seconds = Number(option("seconds", "2"));
const concurrency = Number(option("concurrency", "16"));
const base = option("base", "");
const v8 = option("v8", "");

const workDir = await Deno.makeTempDir({ prefix: "pulsegate-cpu-ab-" });
const layout = await benchLayout({ cpus: navigator.hardwareConcurrency, logDir: workDir });

async function gateway(
  name: string,
  opts: { root: string; fake: string; v8?: string },
): Promise<Service> {
  const { root, fake } = opts;
  const dir = `${workDir}/${name}`;
  await Deno.mkdir(dir, { recursive: true });
  const configPath = `${dir}/config.json`;
  await Deno.writeTextFile(
    configPath,
    JSON.stringify(gatewayConfig({ fake, routes: MAIN_ROUTES })),
  );
  return await Service.start({
    name,
    cmd: [
      Deno.execPath(),
      "run",
      "-A",
      ...(opts.v8 ? [`--v8-flags=${opts.v8}`] : []),
      `${root}bench/gateway_entry.ts`,
    ],
    cwd: root,
    cpus: layout.proxyCpus,
    env: {
      PULSEGATE_PORT: "0",
      PULSEGATE_CONFIG: configPath,
      PULSEGATE_DB_URL: `file:${dir}/pulsegate.db`,
      PULSEGATE_TIME_SCALE: "1",
      BENCH_HISTORY: "on",
    },
  }, { layout, timeoutMs: 60_000 });
}

function spread(values: number[]): string {
  const { median, min, max } = spreadOf(values);
  return `${median.toFixed(1)} (${min.toFixed(1)}–${max.toFixed(1)})`;
}

const tools = await ensureNodeTools({ dir: defaultToolsDir(), installPortkey: false });
const fake = await startFake(layout);
const targets: Record<string, Service> = {};
try {
  targets.floor = await startFloor(layout, { fake: fake.url });
  targets.floor_js = await startFloor(layout, { fake: fake.url, mode: "js" });
  targets.pulsegate = await gateway("pulsegate", { root: REPO_ROOT, fake: fake.url, v8 });
  if (base) {
    const root = base.endsWith("/") ? base : `${base}/`;
    targets.base = await gateway("base", { root, fake: fake.url });
  }
  const names = Object.keys(targets);
  const perDelta: Record<string, number[]> = {};
  const perRequest: Record<string, number[]> = {};
  const rss: Record<string, number[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    // Rotate the order, so no target always runs after the same one.
    const order = names.map((_, i) => names[(i + rep) % names.length]!);
    for (const name of order) {
      const m = await measureCpu({ tools, layout, fake: fake.url }, {
        service: targets[name]!,
        target: name === "floor" || name === "floor_js" ? name : "pulsegate",
        load: { streams, rounds, concurrency, seconds },
      });
      (perDelta[name] ??= []).push(m.usPerDelta);
      (perRequest[name] ??= []).push(m.usPerRequest);
      (rss[name] ??= []).push(m.rssMiB);
      console.error(
        `rep ${rep + 1} ${name}: ${m.usPerDelta.toFixed(1)} µs/delta, ` +
          `${m.usPerRequest.toFixed(1)} µs/request, ${m.errors} errors`,
      );
    }
  }
  console.log(`median (min–max) over ${reps} alternating repetitions`);
  for (const name of names) {
    console.log(
      `${name.padEnd(10)} CPU µs/delta ${spread(perDelta[name]!)}  ` +
        `CPU µs/request ${spread(perRequest[name]!)}  RSS MiB ${spread(rss[name]!)}`,
    );
  }
} finally {
  await Promise.all(Object.values(targets).map((s) => s.stop()));
  await fake.stop();
  await Deno.remove(workDir, { recursive: true });
}
