import assert from "node:assert/strict";
import type { BenchResults } from "../bench/results.ts";

const ROOT = new URL("..", import.meta.url).pathname;

/**
 * Runs `deno task bench --quick` end to end into a temp directory (never over docs/), so the
 * bench cannot rot: every scenario must run and give sane figures. The figures themselves are
 * not judged here; the targets are the full run's business.
 */
Deno.test({
  name: "bench --quick runs every scenario and writes results, chart and doc",
  // The bench spawns and stops its own processes; their resources are not this test's.
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const out = await Deno.makeTempDir({ prefix: "pulsegate-bench-quick-" });
    try {
      const run = await new Deno.Command(Deno.execPath(), {
        // The peer is left out even where it is installed: CI never has it, and it is the
        // slowest process to start.
        args: ["run", "-A", "bench/main.ts", "--quick", "--no-peer", "--out", out],
        cwd: ROOT,
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(240_000),
      }).output();
      const log = new TextDecoder().decode(run.stderr);
      assert.ok(run.success, `bench --quick failed:\n${log.slice(-3000)}`);
      const r = JSON.parse(await Deno.readTextFile(`${out}/bench/results.json`)) as BenchResults;
      assert.equal(r.profile, "quick");
      // ~35 s on an idle 2-core machine; the bound leaves a loaded one 3x that, and still tells a
      // quick run from a full one (minutes).
      assert.ok(r.seconds < 120, `the quick run took ${r.seconds} s`);
      assert.ok(r.machine.cpus >= 1 && r.machine.deno.length > 0);

      const lat = r.scenarios.addedLatency;
      for (const target of ["direct", "floor", "pulsegate", "pulsegate_no_history"]) {
        const row = lat.rows.find((x) => x.target === target);
        assert.ok(row, `added latency has no ${target} row`);
        assert.equal(row.errors, 0, `${target}: ${row.errorExamples.join("; ")}`);
        assert.ok(row.latencyMs.count > 0 && row.latencyMs.p50 > 0, `${target} p50`);
        assert.ok(row.latencyMs.p99 >= row.latencyMs.p50);
      }

      const tp = r.scenarios.throughput;
      for (const target of ["direct", "floor", "floor_js", "pulsegate", "pulsegate_no_history"]) {
        const row = tp.rows.find((x) => x.target === target);
        assert.ok(row && row.levels.length > 0, `throughput has no ${target} levels`);
        for (const level of row.levels) {
          assert.ok(level.rps > 0 && level.p99Ms > 0, `${target} c=${level.concurrency}`);
        }
        // The targets compare resident memory after this run; direct is no process of ours.
        if (target === "direct") assert.equal(row.rssAfterMiB, null);
        else assert.ok(row.rssAfterMiB! > 0, `${target} has no RSS after the run`);
      }
      const gw = tp.rows.find((x) => x.target === "pulsegate")!;
      assert.ok(gw.levels.every((l) => l.cpuUsPerRequest! > 0 && l.maxStallMs !== null));
      // Requests/s at p99 under 20 ms: the floor and pulsegate alone on the zero-delay route.
      const zero = tp.zeroDelay;
      assert.ok(zero, "throughput has no zero-delay sweep");
      assert.equal(zero.boundMs, 20);
      assert.deepEqual(zero.rows.map((x) => x.target), ["floor", "pulsegate"]);
      for (const row of zero.rows) {
        assert.ok(row.levels.length > 0, `the zero-delay sweep ran no level of ${row.target}`);
        for (const level of row.levels) {
          assert.ok(level.rps > 0 && level.p99Ms > 0 && level.cpuUsPerRequest! > 0, row.target);
          // pulsegate runs as shipped here: its probe is off, so no stall is reported.
          assert.equal(level.maxStallMs, null, `${row.target} c=${level.concurrency}`);
        }
        const best = row.levels.find((l) => l.concurrency === row.bestConcurrency);
        assert.equal(row.bestRps, best ? best.rps : 0, `${row.target}: best is a level held`);
        if (best) assert.ok(best.p99Ms < 20 && best.errors === 0);
      }

      const st = r.scenarios.streaming;
      for (const target of ["direct", "floor", "pulsegate"]) {
        const row = st.rows.find((x) => x.target === target);
        assert.ok(row, `streaming has no ${target} row`);
        assert.equal(row.complete, row.streams, `${target}: ${row.errors.join("; ")}`);
        assert.equal(row.lostDeltas, 0);
        assert.ok(row.ttftMs.p50 > 0 && row.delayMs.p50 > 0);
      }

      const held = r.scenarios.heldStreams.rows.find((x) => x.target === "pulsegate");
      assert.ok(held, "no held-stream run through pulsegate");
      assert.equal(held.held, held.count, "every stream was held");
      assert.equal(held.completeStreams, held.count, held.errorExamples.join("; "));
      assert.equal(held.lostDeltas, 0);
      assert.ok(held.keepAlivesMin >= 1, "every held stream had a keep-alive");
      assert.equal(held.inflightAfter, 0, "in-flight returned to 0");
      assert.ok(held.rssHeldMiB > 0);
      // The held-heap target's figure: read after a full GC, so it is what the streams keep.
      const live = held.liveHeapBytesPerStream!;
      assert.ok(Number.isFinite(live) && live > 0, `live JS heap per held stream: ${live}`);

      const hist = r.scenarios.historyWrites;
      assert.ok(hist.writer.rowsPerSecond > 0 && hist.writer.batchMs.max > 0);
      assert.equal(hist.writer.executor, "worker", "the writer alone runs as the gateway does");
      assert.ok(hist.writerInThread && hist.writerInThread.rowsPerSecond > 0);
      const on = hist.underLoad.rows.find((x) => x.target === "pulsegate");
      assert.ok(on && on.rowsPerSecond > 0 && on.batches > 0, "history rows were written");
      assert.ok(Number.isFinite(on.maxStallMs), "the gateway's loop probe reported its stalls");

      const cpu = r.scenarios.cpuCost;
      // The quick profile runs one repetition; the full run alternates five (bench/profile.ts).
      assert.ok(cpu && cpu.reps === 1, `the quick run's CPU cost repetitions: ${cpu?.reps}`);
      for (const row of cpu.rows) {
        assert.equal(row.usPerDelta.length, cpu.reps, `${row.target}: one figure per repetition`);
        // Read from each thread's schedstat (ns): every repetition's work shows, however short.
        const figures = [...row.usPerDelta, ...row.usPerRequest];
        assert.ok(figures.every((v) => Number.isFinite(v) && v > 0), `${row.target}: ${figures}`);
      }
      assert.deepEqual(cpu.rows.map((x) => x.target), ["floor", "floor_js", "pulsegate"]);
      const js = cpu.rows.find((x) => x.target === "floor_js")!;
      assert.equal(js.errors, 0, "the JS relay floor relays every stream and answer");

      const scale = r.scenarios.historyAtScale;
      assert.ok(scale && scale.requests === 20_000, "the quick run's history is 20k requests");
      assert.ok(scale.bytesPerRequest > 100, `bytes per request: ${scale.bytesPerRequest}`);
      assert.ok(scale.admin.length >= 10 && scale.admin.every((a) => a.status === 200));
      assert.ok(scale.proxiedP99Ms.alone > 0 && scale.proxiedP99Ms.duringAdmin > 0);

      // The live view: both cases ran, a tick is one page, and no stream failed to open.
      const liveView = r.scenarios.liveView;
      assert.deepEqual(liveView?.cases.map((c) => c.instances), [1, 2]);
      for (const c of liveView!.cases) {
        assert.equal(c.errors, 0, `${c.label}: ${c.errorExamples.join("; ")}`);
        assert.equal(c.running, c.streams, `${c.label}: every stream was running`);
        assert.ok(c.bytesPerTick.ticks > 0 && c.bytesPerTick.max <= 64 * 1024, c.label);
        assert.ok(c.healthzP99Ms.none > 0 && c.healthzP99Ms.threeTabs > 0, c.label);
      }

      // The targets, in docs/benchmarks.md's order: the tail and the gateway's own cost first,
      // then the standing ones.
      assert.deepEqual(r.targets.map((t) => t.id), [
        "latency",
        "throughput_p99_20ms",
        "history_cost",
        "cpu_request",
        "throughput_floor",
        "cpu_delta",
        "held_late",
        "held_heap",
        "stream_gap",
        "rss_throughput",
        "throughput_portkey",
      ]);
      const measured = r.targets.filter((t) => t.met !== null).map((t) => t.id);
      for (
        const id of [
          "latency",
          "throughput_p99_20ms",
          "cpu_request",
          "cpu_delta",
          "held_heap",
          "rss_throughput",
        ]
      ) {
        assert.ok(measured.includes(id), `${id} was not measured`);
      }
      for (const t of r.targets) {
        // A measured row shows only figures it has; a missed one says by how much.
        if (t.met !== null) assert.ok(!t.measured.includes("n/a"), `${t.id}: ${t.measured}`);
        if (t.met === false) assert.ok(t.gap.length > 0, `${t.id} is missed without a gap`);
        else assert.equal(t.closeWith, "", `${t.id}: advice only where missed`);
      }
      const latency = r.targets.find((t) => t.id === "latency")!;
      assert.match(latency.target, /p50 at most 0\.25 ms and p99 at most 1 ms over the floor/);
      assert.match(r.targets.find((t) => t.id === "cpu_delta")!.measured, /JS relay floor's/);
      const doc = await Deno.readTextFile(`${out}/docs/benchmarks.md`);
      for (
        const heading of [
          "## Targets",
          "## 1.",
          "## 2.",
          "## 3.",
          "## 4.",
          "## 5.",
          "## 6.",
          "## 8.",
        ]
      ) {
        assert.ok(doc.includes(heading), `the doc lacks ${heading}`);
      }
      const svg = await Deno.readTextFile(`${out}/bench/latency_vs_load.svg`);
      assert.match(svg, /^<svg[\s\S]*<polyline[\s\S]*<\/svg>\n$/);

      // --render rewrites the same doc from results.json alone.
      const render = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "bench/main.ts", "--render", "--out", out],
        cwd: ROOT,
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(60_000),
      }).output();
      assert.ok(render.success, new TextDecoder().decode(render.stderr).slice(-2000));
      assert.equal(await Deno.readTextFile(`${out}/docs/benchmarks.md`), doc);
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  },
});
