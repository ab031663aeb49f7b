/**
 * Scenario 8 alone (bench/scenarios/live_view.ts), without the rest of the bench:
 *
 *   deno run -A bench/live_view.ts [--quick] [--keep] [streams=N]
 *
 * Starts the fake upstream, runs the scenario's two cases and prints its result as JSON. The
 * figures are the ones `deno task bench` writes to docs/benchmarks.md section 8. `--keep` keeps
 * its work directory (the gateways' databases and logs).
 */
import type { BenchContext } from "./context.ts";
import { benchLayout, describeMachine } from "./machine.ts";
import { FULL, QUICK } from "./profile.ts";
import { liveView } from "./scenarios/live_view.ts";
import { startFake } from "./stack.ts";

const base = Deno.args.includes("--quick") ? QUICK : FULL;
const streams = Number(Deno.args.find((a) => a.startsWith("streams="))?.slice(8) ?? NaN);
const profile = Number.isFinite(streams)
  ? { ...base, liveView: { ...base.liveView, streams } }
  : base;
const started = performance.now();
const log = (message: string) =>
  console.error(`[live view ${((performance.now() - started) / 1000).toFixed(1)}s] ${message}`);
const machine = await describeMachine();
const workDir = await Deno.makeTempDir({ prefix: "pulsegate-live-view-" });
const layout = await benchLayout({ cpus: machine.cpus, logDir: `${workDir}/logs` });
await Deno.mkdir(layout.logDir, { recursive: true });
const fake = await startFake(layout);
const ctx: BenchContext = {
  profile,
  layout,
  tools: { dir: "", node: "", autocannon: null, portkey: null, problems: [] },
  stack: {
    endpoints: { fake: fake.url },
    fake,
    proxies: {},
    controls: {},
    skipped: [],
    stop: () => fake.stop(),
  },
  workDir,
  log,
};
try {
  console.log(JSON.stringify(await liveView(ctx), null, 2));
} finally {
  await fake.stop();
  if (Deno.args.includes("--keep")) log(`logs in ${layout.logDir}`);
  else await Deno.remove(workDir, { recursive: true }).catch(() => {});
}
