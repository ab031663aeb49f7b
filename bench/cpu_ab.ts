/**
 * A developer's tool beside the bench: CPU per streamed delta and per whole answer of the floor,
 * the JS relay floor (floor_proxy.ts with BENCH_FLOOR_MODE=js) and one or two pulsegate trees,
 * measured in alternating repetitions on one shared fake, so a hot-path change is judged by CPU
 * time (not wall-clock, which neighbours make noisy) and by its spread over the repetitions.
 *
 *   deno run -A bench/cpu_ab.ts [--base /path/to/other/checkout] [--reps 3] [--streams 128] [--rounds 2]
 *     [--seconds 2] [--concurrency 16] [--history-off] [--no-floors]
 *
 * `--v8 FLAGS` starts this tree's gateways with `--v8-flags=FLAGS` (the base's without), to judge
 * a V8 setting the same way: `--base` naming this same checkout compares the setting with none.
 *
 * `--latency N` adds, to each repetition, scenario 9's measure (bench/scenarios/one_caller.ts):
 * N requests one at a time per target, whole and streamed, every target alternating in rounds of
 * `--per-round` (default 250) within one load job; it prints each target's p50 / p99 per
 * repetition and their medians, so a change to the tail is judged in the same run as its floor.
 * `--json FILE` also writes every repetition's figures there (bench/v8_trials.ts reads them).
 *
 * `--base` runs that checkout's gateway (its bench/gateway_entry.ts) as a second target, e.g.
 * `git archive main | tar -x -C /tmp/base`, for a before/after in the same conditions.
 * `--streams 0` skips the streamed part. `--history-off` adds a twin of each gateway with history off (`BENCH_HISTORY=off`, as the
 * bench's "pulsegate, history off"), so history's cost is the difference between twins measured
 * in the same repetitions; `--no-floors` leaves the two floors out. Req/s is the whole answers'
 * rate at `--concurrency`: with the proxy pinned to one core and that core saturated, it is the
 * throughput the CPU per request allows. `--together` loads every target at once in each
 * repetition (whole answers only, one autocannon each, all on the load cores; the targets share
 * the proxy core): a neighbour's burst then weighs on every target alike, which on a shared
 * machine makes the twins' difference far steadier than measuring them one after another.
 */
import { benchLayout } from "./machine.ts";
import { defaultToolsDir, ensureNodeTools } from "./npm_tools.ts";
import { Service } from "./services.ts";
import { MAIN_ROUTES, REPO_ROOT, startFake, startFloor } from "./stack.ts";
import { gatewayConfig } from "./targets.ts";
import { measureCpu, spreadOf } from "./scenarios/cpu_cost.ts";
import { type LatencyTarget, oneCallerRound } from "./one_caller_round.ts";
import type { AbRun } from "./v8_trials.ts";

/** The 1-minute load average, for the figures' context on a shared machine. */
async function loadAverage(): Promise<number> {
  try {
    return Number((await Deno.readTextFile("/proc/loadavg")).split(" ")[0]);
  } catch {
    return NaN;
  }
}

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
const historyOff = Deno.args.includes("--history-off");
const floors = !Deno.args.includes("--no-floors");
const together = Deno.args.includes("--together");
const latency = Number(option("latency", "0"));
const perRound = Number(option("per-round", "250"));
const jsonOut = option("json", "");
if (Deno.args.includes("--help")) {
  console.log(
    "deno run -A bench/cpu_ab.ts [--base DIR] [--reps N] [--streams N] [--rounds N] " +
      "[--seconds S] [--concurrency N] [--history-off] [--no-floors] [--together] " +
      "[--v8 FLAGS] [--latency N] [--per-round N]",
  );
  Deno.exit(0);
}

const loadAtStart = await loadAverage();
const startedAt = new Date().toISOString();
const workDir = await Deno.makeTempDir({ prefix: "pulsegate-cpu-ab-" });
const layout = await benchLayout({ cpus: navigator.hardwareConcurrency, logDir: workDir });

async function gateway(
  name: string,
  opts: { root: string; fake: string; history: boolean; v8?: string },
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
      // The held scenario opens 5,000 client connections; the default cap is 4,096
      // (docs/deploy.md "Connection limits").
      PULSEGATE_MAX_CONNECTIONS: "20000",
      PULSEGATE_CONFIG: configPath,
      PULSEGATE_DB_URL: `file:${dir}/pulsegate.db`,
      PULSEGATE_TIME_SCALE: "1",
      BENCH_HISTORY: opts.history ? "on" : "off",
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
  if (floors) {
    targets.floor = await startFloor(layout, { fake: fake.url });
    targets.floor_js = await startFloor(layout, { fake: fake.url, mode: "js" });
  }
  const roots: Record<string, string> = { pulsegate: REPO_ROOT };
  if (base) roots.base = base.endsWith("/") ? base : `${base}/`;
  for (const [name, root] of Object.entries(roots)) {
    const flags = name === "pulsegate" ? v8 : "";
    targets[name] = await gateway(name, { root, fake: fake.url, history: true, v8: flags });
    if (historyOff) {
      targets[`${name}_off`] = await gateway(`${name}_off`, {
        root,
        fake: fake.url,
        history: false,
        v8: flags,
      });
    }
  }
  const names = Object.keys(targets);
  const perDelta: Record<string, number[]> = {};
  const perRequest: Record<string, number[]> = {};
  const rps: Record<string, number[]> = {};
  const rss: Record<string, number[]> = {};
  const mainUs: Record<string, number[]> = {};
  /** Per target and kind ("floor:whole"), one p50 and one p99 per repetition. */
  const p50: Record<string, number[]> = {};
  const p99: Record<string, number[]> = {};
  const workerUs: Record<string, number[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    // Rotate the order, so no target always runs after the same one.
    const order = names.map((_, i) => names[(i + rep) % names.length]!);
    const measure = (name: string) =>
      measureCpu({ tools, layout, fake: fake.url }, {
        service: targets[name]!,
        target: name === "floor" || name === "floor_js" ? name : "pulsegate",
        load: { streams: together ? 0 : streams, rounds, concurrency, seconds },
      });
    const measured: Awaited<ReturnType<typeof measure>>[] = [];
    if (together) measured.push(...await Promise.all(order.map(measure)));
    else for (const name of order) measured.push(await measure(name));
    order.forEach((name, i) => {
      const m = measured[i]!;
      (perDelta[name] ??= []).push(m.usPerDelta);
      (perRequest[name] ??= []).push(m.usPerRequest);
      (rps[name] ??= []).push(m.rps);
      (rss[name] ??= []).push(m.rssMiB);
      if (m.threads) {
        (mainUs[name] ??= []).push(m.threads.mainUs);
        (workerUs[name] ??= []).push(m.threads.workerUs);
      }
      const split = m.threads
        ? ` (serving ${m.threads.mainUs.toFixed(1)}, workers ${m.threads.workerUs.toFixed(1)})`
        : "";
      console.error(
        `rep ${rep + 1} ${name}: ${m.usPerDelta.toFixed(1)} µs/delta, ` +
          `${m.usPerRequest.toFixed(1)} µs/request${split}, ${m.rps.toFixed(0)} req/s, ` +
          `${m.errors} errors`,
      );
    });
    if (latency > 0) {
      const latencyTargets: LatencyTarget[] = order.map((name) => ({
        name,
        url: targets[name]!.url,
        gateway: name !== "floor" && name !== "floor_js",
      }));
      const round = await oneCallerRound({ layout, fake: fake.url }, {
        targets: latencyTargets,
        requests: latency,
        perRound,
      });
      for (const [unit, s] of Object.entries(round)) {
        (p50[unit] ??= []).push(s.p50);
        (p99[unit] ??= []).push(s.p99);
        console.error(
          `rep ${rep + 1} ${unit}: one at a time p50 ${s.p50.toFixed(3)} ms, p99 ` +
            `${s.p99.toFixed(3)} ms, max ${s.max.toFixed(3)} ms (${s.count} requests, ` +
            `${s.errors} errors)`,
        );
      }
    }
  }
  console.log(
    `median (min–max) over ${reps} ${together ? "simultaneous" : "alternating"} repetitions`,
  );
  for (const name of names) {
    const threads = mainUs[name] && workerUs[name]
      ? `  (serving thread ${spread(mainUs[name])}, workers ${spread(workerUs[name])})`
      : "";
    console.log(
      `${name.padEnd(14)} CPU µs/delta ${spread(perDelta[name]!)}  ` +
        `CPU µs/request ${spread(perRequest[name]!)}${threads}  req/s ${spread(rps[name]!)}  ` +
        `RSS MiB ${spread(rss[name]!)}`,
    );
  }
  const spread3 = (values: number[]) => {
    const { median, min, max } = spreadOf(values);
    return `${median.toFixed(3)} (${min.toFixed(3)}–${max.toFixed(3)})`;
  };
  for (const unit of Object.keys(p50)) {
    const [name, kind] = unit.split(":");
    const floor = p50[`floor:${kind}`] ? `floor:${kind}` : null;
    const added = floor && name !== "floor"
      ? `  added over the floor: p50 ${
        spread3(p50[unit]!.map((x, i) => x - (p50[floor]![i] ?? NaN)))
      }, p99 ${spread3(p99[unit]!.map((x, i) => x - (p99[floor]![i] ?? NaN)))}`
      : "";
    console.log(
      `${unit.padEnd(20)} one at a time ms: p50 ${spread3(p50[unit]!)}  p99 ` +
        `${spread3(p99[unit]!)}${added}`,
    );
  }
  // This tree against the base within each repetition: a setting or change wins only where
  // every repetition's difference has the same sign.
  for (const kind of ["whole", "streamed"]) {
    const mine = `pulsegate:${kind}`;
    const theirs = `base:${kind}`;
    if (!p50[mine] || !p50[theirs]) continue;
    const diff = (by: Record<string, number[]>) =>
      by[mine]!.map((x, i) => x - (by[theirs]![i] ?? NaN));
    console.log(
      `pulsegate − base, ${kind}: p50 ${diff(p50).map((x) => x.toFixed(3)).join(", ")}; ` +
        `p99 ${diff(p99).map((x) => x.toFixed(3)).join(", ")} ms (each repetition)`,
    );
  }
  if (perRequest.pulsegate && perRequest.base) {
    const d = perRequest.pulsegate.map((x, i) => x - (perRequest.base![i] ?? NaN));
    console.log(
      `pulsegate − base: CPU µs/request ${d.map((x) => x.toFixed(1)).join(", ")} (each repetition)`,
    );
  }
  if (jsonOut) {
    const trial: AbRun = {
      command: `deno run -A bench/cpu_ab.ts ${
        Deno.args.filter((a, i, all) => a !== "--json" && all[i - 1] !== "--json").join(" ")
      }`,
      v8,
      startedAt,
      loadAverage: { start: loadAtStart, end: await loadAverage() },
      reps,
      usPerDelta: perDelta,
      usPerRequest: perRequest,
      rps,
      rssMiB: rss,
      p50Ms: p50,
      p99Ms: p99,
    };
    await Deno.writeTextFile(jsonOut, JSON.stringify(trial, null, 2) + "\n");
  }
  // History's cost per gateway: the difference between its twins within each repetition (they
  // run back to back, so a neighbour's burst that lasts longer than one measurement weighs on
  // both), then the median over the repetitions.
  for (const name of Object.keys(roots)) {
    const on = perRequest[name];
    const off = perRequest[`${name}_off`];
    if (!on || !off) continue;
    const paired = (a: number[], b: number[]) => a.map((x, i) => x - (b[i] ?? NaN));
    const cost = paired(on, off);
    const share = on.map((x, i) => 100 * (1 - (off[i] ?? NaN) / x));
    const less = rps[name]!.map((x, i) => 100 * (1 - x / (rps[`${name}_off`]![i] ?? NaN)));
    const serving = mainUs[name] && mainUs[`${name}_off`]
      ? `, of which the serving thread ${spread(paired(mainUs[name], mainUs[`${name}_off`]!))}` +
        ` and workers ${spread(paired(workerUs[name]!, workerUs[`${name}_off`]!))}`
      : "";
    console.log(
      `${name}: history costs ${spread(cost)} µs of CPU per whole answer${serving}; ` +
        `${spread(share)} % of the throughput the CPU allows; ${spread(less)} % fewer req/s ` +
        "(each: median (min–max) of the twins' difference within a repetition)",
    );
  }
} finally {
  await Promise.all(Object.values(targets).map((s) => s.stop()));
  await fake.stop();
  await Deno.remove(workDir, { recursive: true });
}
