/**
 * `deno task bench [--quick] [--no-peer] [--out DIR]`: runs the bench's scenarios
 * (docs/benchmarks.md) against pulsegate, the floor proxy and Portkey (unless `--no-peer`), each
 * in its own process, and writes `bench/results.json`,
 * `bench/latency_vs_load.svg` and `docs/benchmarks.md` under DIR (default: the repository).
 * `--render` measures nothing: it rewrites the checks, doc and chart from DIR's results.json.
 */
import { profileHeldContent } from "./held_profile.ts";
import type { BenchContext } from "./context.ts";
import { benchLayout, cpuSnapshot, describeMachine, waitForQuiet } from "./machine.ts";
import { AUTOCANNON, defaultToolsDir, ensureNodeTools, PORTKEY } from "./npm_tools.ts";
import { FULL, type Profile, QUICK } from "./profile.ts";
import { profileHotPath, STREAM_HOT_PATH } from "./hot_path.ts";
import { checkTargets } from "./report/checks.ts";
import { renderMarkdown } from "./report/markdown.ts";
import { latencyChart } from "./report/svg_chart.ts";
import type { BenchResults } from "./results.ts";
import { addedLatency } from "./scenarios/added_latency.ts";
import { heldStreams } from "./scenarios/held_streams.ts";
import { historyWrites } from "./scenarios/history_writes.ts";
import { historyAtScale } from "./scenarios/history_at_scale.ts";
import { liveView } from "./scenarios/live_view.ts";
import { cpuCost } from "./scenarios/cpu_cost.ts";
import { streaming } from "./scenarios/streaming.ts";
import { throughput } from "./scenarios/throughput.ts";
import { REPO_ROOT, startStack } from "./stack.ts";

interface Args {
  profile: Profile;
  out: string;
  keep: boolean;
  /** Whether to run the peer gateway (Portkey) when it is installed. */
  peer: boolean;
}

function parseArgs(args: string[]): Args {
  let out = REPO_ROOT;
  const at = args.indexOf("--out");
  if (at >= 0) {
    const dir = args[at + 1];
    if (!dir) throw new Error("--out needs a directory");
    out = dir.endsWith("/") ? dir : `${dir}/`;
  }
  return {
    profile: args.includes("--quick") ? QUICK : FULL,
    out,
    keep: args.includes("--keep"),
    peer: !args.includes("--no-peer"),
  };
}

async function run(args: Args): Promise<BenchResults> {
  const started = performance.now();
  const log = (message: string) =>
    console.error(`[bench ${((performance.now() - started) / 1000).toFixed(1)}s] ${message}`);
  const machine = await describeMachine();
  const workDir = await Deno.makeTempDir({ prefix: "pulsegate-bench-" });
  const layout = await benchLayout({ cpus: machine.cpus, logDir: `${workDir}/logs` });
  await Deno.mkdir(layout.logDir, { recursive: true });
  log(`${args.profile.name} run; work dir ${workDir}; tools in ${defaultToolsDir()}`);
  const tools = await ensureNodeTools({
    dir: defaultToolsDir(),
    installPortkey: args.profile.installPortkey,
  });
  if (!tools.autocannon) throw new Error(`autocannon is needed: ${tools.problems.join("; ")}`);
  if (!args.peer && tools.portkey) {
    tools.portkey = null;
    tools.problems.push("the peer gateway was left out (--no-peer)");
  }
  machine.otherLoadAtStartPercentOfCore = await waitForQuiet({
    maxMs: args.profile.name === "full" ? 90_000 : 0,
    quietPercent: 25,
    log,
  });
  const cpuBefore = await cpuSnapshot();
  const measuredFrom = performance.now();
  const stack = await startStack(layout, { tools, workDir });
  const ctx: BenchContext = { profile: args.profile, layout, tools, stack, workDir, log };
  const notes: string[] = [...tools.problems];
  let scenarios: BenchResults["scenarios"];
  let hot: BenchResults["hotPath"] = null;
  let hotStream: BenchResults["hotPathStream"] = null;
  let hotHeld: BenchResults["hotPathHeld"] = null;
  try {
    scenarios = {
      addedLatency: await addedLatency(ctx),
      throughput: await throughput(ctx),
      streaming: await streaming(ctx),
      heldStreams: await heldStreams(ctx),
      historyWrites: await historyWrites(ctx),
      cpuCost: await cpuCost(ctx),
      historyAtScale: await historyAtScale(ctx),
      liveView: await liveView(ctx),
    };
    if (args.profile.name === "full") {
      hot = await profileHotPath({ ...ctx, fake: stack.fake.url });
      hotStream = await profileHotPath({ ...ctx, fake: stack.fake.url }, STREAM_HOT_PATH);
      hotHeld = await profileHeldContent(ctx);
    }
  } finally {
    await stack.stop();
    if (!args.keep) await Deno.remove(workDir, { recursive: true }).catch(() => {});
  }
  const cpuAfter = await cpuSnapshot();
  const wallMs = performance.now() - measuredFrom;
  const otherMs = (cpuAfter.machineBusyMs - cpuBefore.machineBusyMs) -
    (cpuAfter.oursMs - cpuBefore.oursMs);
  machine.otherLoadPercentOfCore = Math.max(0, Math.round((100 * otherMs) / wallMs));
  return {
    version: 1,
    profile: args.profile.name,
    startedAt: new Date(Date.now() - (performance.now() - started)).toISOString(),
    seconds: Math.round((performance.now() - started) / 1000),
    machine,
    setup: {
      proxyCpus: layout.proxyCpus,
      loadCpus: layout.loadCpus,
      loadGenerator: `${AUTOCANNON} (Node) for throughput; bench/load/*.ts (Deno) for the rest`,
      peer: tools.portkey ? PORTKEY : null,
      historyOff: "the history writer's writeRequest/writeAttempt replaced by no-ops in " +
        "bench/gateway_entry.ts (rows are still built, none is queued or written)",
      database: "a fresh local libSQL file per gateway process, in the OS temp directory, " +
        "written from the history writer's worker thread (`workerExecutor`, as for any local " +
        "file)",
      notes,
    },
    scenarios,
    hotPath: hot,
    hotPathStream: hotStream,
    hotPathHeld: hotHeld,
    targets: checkTargets(scenarios, { hot, hotStream, hotHeld, machine }),
  };
}

/**
 * The targets judged over the kept earlier run (bench/results_before.json, committed by hand when
 * a round of work starts), so the doc can show before → after; null when there is none.
 */
async function judgeBefore(out: string): Promise<BenchResults["before"]> {
  let text: string;
  try {
    text = await Deno.readTextFile(`${out}bench/results_before.json`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  const old = JSON.parse(text) as BenchResults & { label?: string };
  return {
    startedAt: old.startedAt,
    label: old.label ?? "the earlier run",
    targets: checkTargets(old.scenarios, {
      hot: old.hotPath,
      hotStream: old.hotPathStream ?? null,
      hotHeld: old.hotPathHeld ?? null,
      machine: old.machine,
    }),
  };
}

async function write(results: BenchResults, out: string): Promise<void> {
  await Deno.mkdir(`${out}bench`, { recursive: true });
  await Deno.mkdir(`${out}docs`, { recursive: true });
  await Deno.writeTextFile(`${out}bench/results.json`, JSON.stringify(results, null, 2) + "\n");
  await Deno.writeTextFile(
    `${out}bench/latency_vs_load.svg`,
    latencyChart(results.scenarios.throughput),
  );
  await Deno.writeTextFile(`${out}docs/benchmarks.md`, renderMarkdown(results));
  // The outputs are committed, and `deno task check` runs `deno fmt --check` over them.
  await new Deno.Command(Deno.execPath(), {
    args: [
      "fmt",
      "--quiet",
      `${out}docs/benchmarks.md`,
      `${out}bench/results.json`,
      `${out}bench/latency_vs_load.svg`,
    ],
    cwd: REPO_ROOT,
    stdout: "null",
    stderr: "null",
  }).output();
}

/** `--render`: the doc, chart and target checks again from results.json, measuring nothing. */
async function rerender(out: string): Promise<BenchResults> {
  const results = JSON.parse(await Deno.readTextFile(`${out}bench/results.json`)) as BenchResults;
  results.hotPathStream ??= null;
  results.targets = checkTargets(results.scenarios, {
    hot: results.hotPath,
    hotStream: results.hotPathStream,
    hotHeld: results.hotPathHeld ?? null,
    machine: results.machine,
  });
  return results;
}

if (import.meta.main) {
  const args = parseArgs(Deno.args);
  const render = Deno.args.includes("--render");
  const results = render ? await rerender(args.out) : await run(args);
  results.before = await judgeBefore(args.out);
  await write(results, args.out);
  console.error(
    render
      ? `bench: rewrote ${args.out}docs/benchmarks.md from the run of ${results.startedAt}`
      : `bench: wrote ${args.out}docs/benchmarks.md in ${results.seconds} s`,
  );
}
