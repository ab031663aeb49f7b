/**
 * docs/benchmarks.md, written whole from one run's results: every figure in it comes from
 * results.json, so the doc and the data cannot disagree.
 */
import type {
  BenchResults,
  HistoryUnderLoad,
  HistoryWriterRun,
  HotPathProfile,
  Skipped,
  ThroughputRow,
  ThroughputSweep,
} from "../results.ts";
import type { Summary } from "../stats.ts";
import { methodSection } from "./method.ts";
import { spreadOf } from "../scenarios/cpu_cost.ts";
import { judgeTrial } from "../v8_trials.ts";

const n = (v: number | null | undefined, digits = 2): string =>
  v === null || v === undefined || !Number.isFinite(v)
    ? "–"
    : v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });

function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(head), line(head.map(() => "---")), ...rows.map(line)].join("\n");
}

const pair = (a: number | undefined, b: number | undefined, digits = 3) =>
  `${n(a, digits)} / ${n(b, digits)}`;

function skippedNotes(skipped: Skipped[]): string {
  if (!skipped.length) return "";
  return "\n\n" + skipped.map((s) => `- **${s.target}** not measured: ${s.reason}`).join("\n");
}

function machine(r: BenchResults): string {
  const m = r.machine;
  const pin = r.setup.proxyCpus
    ? `The proxy under test runs alone on CPU ${r.setup.proxyCpus}; the fake upstream and the ` +
      `load generator share CPU ${r.setup.loadCpus} (\`taskset -c\`, set on each spawned process).`
    : "No pinning: fewer than two CPUs or no `taskset` here.";
  return [
    "## Machine",
    "",
    table(
      ["CPUs (nproc)", "model", "memory", "kernel", "Deno", "V8", "Node", "file limit"],
      [[
        String(m.cpus),
        m.cpuModel,
        `${m.memoryGiB} GiB`,
        m.kernel,
        m.deno,
        m.v8,
        m.node ?? "–",
        String(m.fileLimit ?? "–"),
      ]],
    ),
    "",
    pin,
    "",
    `While the bench ran, other processes on the machine used about ` +
    `${m.otherLoadPercentOfCore ?? "?"} % of one core on average ` +
    `(${m.otherLoadAtStartPercentOfCore ?? "?"} % just before it; busy time from /proc/stat ` +
    `minus the bench's own processes). They are not pinned and can land on the proxy's core: ` +
    `the more there is, the noisier the tails (p99, max, stalls).`,
  ].join("\n");
}

/** A target check's result in a word: met, missed, or not measured. */
function verdictWord(met: boolean | null): string {
  return met === null ? "not measured" : met ? "met" : "missed";
}

function targets(r: BenchResults): string {
  const verdict = (met: boolean | null) =>
    met === null ? verdictWord(met) : `**${verdictWord(met)}**`;
  const closing = r.targets.filter((t) => t.closeWith);
  return [
    "## Targets",
    "",
    table(
      ["target", "measured", "result", "by how much"],
      r.targets.map((t) => [t.target, t.measured, verdict(t.met), t.gap || "–"]),
    ),
    ...(closing.length
      ? [
        "",
        "Where a target is missed, what the measurements and profiles point at:",
        "",
        ...closing.map((t) => `- *${t.target}*: ${t.closeWith}`),
      ]
      : []),
  ].join("\n");
}

/** Each target's figure in the earlier run beside this run's, when an earlier run is kept. */
function beforeAfter(r: BenchResults): string {
  const before = r.before;
  if (!before) return "";
  const then = new Map(before.targets.map((t) => [t.id, t]));
  return [
    "## Before → after",
    "",
    `Before: ${before.label}, the run of ${before.startedAt.slice(0, 10)} ` +
    `([bench/results_before.json](../bench/results_before.json)), judged by this run's targets. ` +
    `After: this run. The two ran on the same kind of machine, not in one process, so small ` +
    `differences are noise; the ratios to the floor are the figures to compare.`,
    "",
    table(
      ["target", "before", "after"],
      r.targets.map((t) => {
        const old = then.get(t.id);
        return [
          t.target,
          old ? `${old.measured} (${verdictWord(old.met)})` : "not measured",
          `${t.measured} (${verdictWord(t.met)})`,
        ];
      }),
    ),
  ].join("\n");
}

function addedLatency(r: BenchResults): string {
  const s = r.scenarios.addedLatency;
  return [
    "## 1. Added latency, one request at a time",
    "",
    `Zero-delay fake upstream, ${s.requestsPerTarget} requests per target in ${s.rounds} ` +
    `alternating rounds, one keep-alive connection each. Added = the target's percentile minus ` +
    `direct's. Milliseconds.`,
    "",
    table(
      ["target", "p50", "p90", "p99", "max", "added p50", "added p99", "errors"],
      s.rows.map((row) => [
        row.label,
        n(row.latencyMs.p50, 3),
        n(row.latencyMs.p90, 3),
        n(row.latencyMs.p99, 3),
        n(row.latencyMs.max, 3),
        n(row.addedMs?.p50, 3),
        n(row.addedMs?.p99, 3),
        row.errors ? `${row.errors}: ${row.errorExamples[0] ?? ""}` : "0",
      ]),
    ),
  ].join("\n") + skippedNotes(s.skipped);
}

function oneCaller(r: BenchResults): string {
  const s = r.scenarios.oneCaller;
  if (!s) return "";
  const t = s.throughput64;
  const floor64 = t.rows.find((x) => x.target === "floor");
  const median = (v: number[]) => spreadOf(v).median;
  return [
    "## 9. Added latency, one request at a time, whole and streamed",
    "",
    `The latency one caller feels, stated as published gateway comparisons state it: ` +
    `${n(s.requestsPerTarget, 0)} requests per target and kind, one at a time over one ` +
    `keep-alive connection each, in ${s.rounds} rounds whose order rotates over every target ` +
    `and kind (one load job, so the floor and pulsegate alternate). *Whole*: the zero-delay ` +
    `route (~200 bytes). *Streamed*: the \`stream8\` route, eight deltas at once then ` +
    `\`[DONE]\`, timed to the last byte (first chunk apart). Added = the target's percentile ` +
    `minus the floor's, same kind. Milliseconds.`,
    "",
    table(
      [
        "target",
        "kind",
        "p50",
        "p90",
        "p99",
        "max",
        "added p50",
        "added p90",
        "added p99",
        "added max",
        "first chunk p50 / p99",
        "errors",
      ],
      s.rows.map((row) => [
        row.label,
        row.kind,
        n(row.latencyMs.p50, 3),
        n(row.latencyMs.p90, 3),
        n(row.latencyMs.p99, 3),
        n(row.latencyMs.max, 3),
        n(row.addedMs?.p50, 3),
        n(row.addedMs?.p90, 3),
        n(row.addedMs?.p99, 3),
        n(row.addedMs?.max, 3),
        row.firstChunkMs ? pair(row.firstChunkMs.p50, row.firstChunkMs.p99) : "–",
        row.errors ? `${row.errors}: ${row.errorExamples[0] ?? ""}` : "0",
      ]),
    ),
    "",
    `Whole answers at ${t.connections} connections (zero-delay route, autocannon, ` +
    `${t.seconds} s per run, ${t.reps} repetitions whose order rotates): median (min–max).`,
    "",
    table(
      ["target", "req/s", "× floor", "CPU µs per request", "× floor", "p99 ms", "errors"],
      t.rows.map((row) => [
        row.label,
        `${n(median(row.rps), 0)} (${n(Math.min(...row.rps), 0)}–${n(Math.max(...row.rps), 0)})`,
        floor64 ? n(median(row.rps) / median(floor64.rps)) : "–",
        n(median(row.cpuUsPerRequest), 1),
        floor64 ? n(median(row.cpuUsPerRequest) / median(floor64.cpuUsPerRequest)) : "–",
        n(median(row.p99Ms), 0),
        String(row.errors),
      ]),
    ),
  ].join("\n") + skippedNotes(s.skipped);
}

/** Each repetition's difference, this tree with the flags minus without: negative is better. */
const signed = (xs: number[], digits: number) =>
  xs.map((x) => (x > 0 ? "+" : "") + n(x, digits)).join(", ");

function v8Trials(r: BenchResults): string {
  const trials = r.v8Trials ?? [];
  if (!trials.length) return "";
  return [
    "## V8 settings tried (GC tuning)",
    "",
    "Each row is one `bench/cpu_ab.ts` run (bench/v8_trials.ts): this tree's gateway started " +
    "with `--v8-flags=FLAGS` against the same tree without them, alternating in repetitions " +
    "(the floors too, unless `--no-floors`), on one pinned core. Cells are each repetition's difference, with the " +
    "flags minus without (negative is better): CPU per whole answer and per streamed delta " +
    "(scenario 6's measure) and the one-caller p50 / p99 (scenario 9's measure). A setting " +
    "*wins* only when CPU per whole answer and both p99s are better in every repetition; only " +
    "a winner ships, on the server's command line (launch.ts starts the server as a child " +
    "process; `deno task start` runs launch.ts). Load: the machine's 1-minute load average before → after " +
    "(2 cores, shared).",
    "",
    table(
      [
        "flags",
        "run",
        "load",
        "CPU µs / whole answer",
        "CPU µs / delta",
        "p50 whole ms",
        "p99 whole ms",
        "p99 streamed ms",
        "RSS MiB",
        "verdict",
      ],
      trials.map((t) => {
        const v = judgeTrial(t);
        const base = t.usPerRequest.base ?? [];
        return [
          `\`${t.v8}\``,
          `${t.startedAt.slice(0, 16).replace("T", " ")}, ${t.reps} reps`,
          `${n(t.loadAverage.start, 1)} → ${n(t.loadAverage.end, 1)}`,
          `${signed(v.cpuRequest, 1)} (base ${n(spreadOf(base).median, 0)})`,
          signed(v.cpuDelta, 1),
          signed(v.p50Whole, 3),
          `${signed(v.p99Whole, 3)} (base ${n(spreadOf(t.p99Ms["base:whole"] ?? []).median, 2)})`,
          signed(v.p99Streamed, 3),
          signed(v.rss, 0),
          v.wins ? "**wins**" : "lost",
        ];
      }),
    ),
    "",
    "Commands, in order: " + trials.map((t) => `\`${t.command}\``).join("; ") + ".",
  ].join("\n");
}

function levelCell(row: ThroughputRow, c: number, boundMs: number): string {
  const l = row.levels.find((x) => x.concurrency === c);
  if (!l) return "–";
  const over = l.p99Ms >= boundMs || l.errors > 0;
  const text = `${n(l.rps, 0)} / ${l.p99Ms}${l.errors ? ` / ${l.errors} err` : ""}` +
    (l.retried ? " ↻" : "");
  return over ? `*${text}*` : text;
}

function throughput(r: BenchResults): string {
  const s = r.scenarios.throughput;
  const byId = (id: string) => s.rows.find((x) => x.target === id);
  const floor = byId("floor")?.bestRps;
  const portkey = byId("portkey")?.bestRps;
  const levels = [...new Set(s.rows.flatMap((x) => x.levels.map((l) => l.concurrency)))].sort((
    a,
    b,
  ) => a - b);
  const cpuAt = (row: ThroughputRow) =>
    row.levels.find((l) => l.concurrency === row.bestConcurrency)?.cpuUsPerRequest;
  return [
    "## 2. Throughput at a latency bound",
    "",
    `Fake upstream answers after ${s.upstreamDelayMs} ms. autocannon, closed loop, ` +
    `${s.secondsPerLevel} s per level after a warm-up. Best = the highest requests/s of a level ` +
    `with p99 under ${s.boundMs} ms and no error.`,
    "",
    table(
      [
        "target",
        "best req/s",
        "at concurrency",
        "CPU µs/request there",
        "× floor",
        "× Portkey",
        "RSS after the run, MiB",
      ],
      s.rows.map((row) => [
        row.label,
        n(row.bestRps, 0),
        String(row.bestConcurrency ?? "none"),
        n(cpuAt(row), 0),
        floor ? n(row.bestRps / floor) : "–",
        portkey ? n(row.bestRps / portkey) : "–",
        row.rssAfterMiB == null ? "–" : n(row.rssAfterMiB, 1),
      ]),
    ),
    "",
    "![p99 latency against load](../bench/latency_vs_load.svg)",
    "",
    `Every level: requests/s / p99 ms (*italics*: over the bound or with errors; ↻: the ` +
    `first level to miss the bound is run a second time and the better run kept, since a ` +
    `neighbour's burst can only make a run worse).`,
    "",
    table(
      ["concurrency", ...s.rows.map((x) => x.label)],
      levels.map((c) => [String(c), ...s.rows.map((row) => levelCell(row, c, s.boundMs))]),
    ),
    "",
    "CPU the proxy process used per request (user + system, from /proc), µs:",
    "",
    table(
      ["concurrency", ...s.rows.filter((x) => x.target !== "direct").map((x) => x.label)],
      levels.map((c) => [
        String(c),
        ...s.rows.filter((x) => x.target !== "direct").map((row) =>
          n(row.levels.find((l) => l.concurrency === c)?.cpuUsPerRequest, 0)
        ),
      ]),
    ),
    ...zeroDelaySweep(s.zeroDelay),
  ].join("\n") + skippedNotes(s.skipped);
}

/** The zero-delay sweep with its 20 ms bound: every level, and the best of each target. */
function zeroDelaySweep(z: ThroughputSweep | undefined): string[] {
  if (!z) return [];
  const levels = [...new Set(z.rows.flatMap((x) => x.levels.map((l) => l.concurrency)))]
    .sort((a, b) => a - b);
  const floor = z.rows.find((x) => x.target === "floor")?.bestRps;
  return [
    "",
    `### Requests/s at p99 under ${z.boundMs} ms`,
    "",
    `The floor and pulsegate alone against the fake's zero-delay route, ${z.secondsPerLevel} s ` +
    `per level after a warm-up, levels the outer loop and the two alternating within each; a ` +
    `target runs no level past its first miss of the ${z.boundMs} ms bound (after its rerun), ` +
    `and pulsegate's probe is off. Best = the highest requests/s of a level with p99 under ` +
    `${z.boundMs} ms and no error.`,
    "",
    table(
      ["target", "best req/s", "at concurrency", "CPU µs/request there", "× floor"],
      z.rows.map((row) => [
        row.label,
        n(row.bestRps, 0),
        String(row.bestConcurrency ?? "none"),
        n(row.levels.find((l) => l.concurrency === row.bestConcurrency)?.cpuUsPerRequest, 0),
        floor ? n(row.bestRps / floor) : "–",
      ]),
    ),
    "",
    "Every level: requests/s / p99 ms (*italics*: over the bound or with errors; ↻: rerun).",
    "",
    table(
      ["concurrency", ...z.rows.map((x) => x.label)],
      levels.map((c) => [String(c), ...z.rows.map((row) => levelCell(row, c, z.boundMs))]),
    ),
  ];
}

const ms = (s: Summary) => pair(s.p50, s.p99);

function streaming(r: BenchResults): string {
  const s = r.scenarios.streaming;
  return [
    "## 3. Streaming relay",
    "",
    `${s.deltas} deltas ${s.deltaGapMs} ms apart per stream. Each cell is p50 / p99 in ms. ` +
    `*Delay*: arrival here minus the fake's send stamp (one machine, one clock). *Added gap*: the ` +
    `gap between two deltas as they arrived minus the gap the fake left between them.`,
    "",
    table(
      [
        "target",
        "streams (complete)",
        "lost deltas",
        "first token",
        "added first token",
        "delay",
        "added delay",
        "added gap",
        "added gap − direct's",
        "CPU µs per delta",
      ],
      s.rows.map((row) => {
        const direct = s.rows.find((x) => x.target === "direct");
        return [
          row.label,
          `${row.streams} (${row.complete})`,
          String(row.lostDeltas),
          row.complete ? ms(row.ttftMs) : "–",
          row.added ? pair(row.added.ttftP50, row.added.ttftP99) : "–",
          row.complete ? ms(row.delayMs) : "–",
          row.added ? pair(row.added.delayP50, row.added.delayP99) : "–",
          row.complete ? ms(row.addedGapMs) : "–",
          direct && row.target !== "direct" && row.complete
            ? pair(
              row.addedGapMs.p50 - direct.addedGapMs.p50,
              row.addedGapMs.p99 - direct.addedGapMs.p99,
            )
            : "–",
          n(row.cpuUsPerDelta, 0),
        ];
      }),
    ),
    ...s.rows.filter((x) => x.errors.length).map((x) =>
      `\n- ${x.label}: ${x.errors.length} error(s), e.g. \`${x.errors[0]}\``
    ),
  ].join("\n") + skippedNotes(s.skipped);
}

function held(r: BenchResults): string {
  const s = r.scenarios.heldStreams;
  return [
    "## 4. Held streams",
    "",
    `The fake sends headers, then nothing until every stream is held; pulsegate holds each ` +
    `stream for its opening hold and then sends \`: keep-alive\` comments (time scale ` +
    `${s.timeScale}: hold ${s.holdMs / 1000} s, a keep-alive every ${s.keepAliveMs / 1000} s). ` +
    `Resident memory is read from /proc once all are held, and the JS heap and external memory ` +
    `from the gateway without a GC (garbage included); then the fake sends each stream ` +
    `${s.deltas} deltas ${s.deltaGapMs} ms apart. Late: delay over ${s.lateMs} ms. Each count ` +
    `runs on a fresh gateway process; the floor row is a reference for what holding a socket ` +
    `pair costs at all, and for how late content comes when nothing but the runtime relays it; ` +
    `the JS relay row, for the same once each chunk passes through JavaScript ` +
    `(the target allows pulsegate's latest frame 50 ms more than the floor's at the same count). ` +
    `*Live JS heap*: once the content is through, the same gateway holds as many streams again ` +
    `and its heap is read after a full GC before and while they are held (\`/stats?gc=1\`, ` +
    `bench/gateway_entry.ts), then they are cancelled: what a held stream keeps alive, garbage ` +
    `not counted, without a forced GC before the timed content.`,
    "",
    table(
      [
        "target",
        "streams",
        "held",
        "ramp s",
        "RSS before → held MiB",
        "per stream: RSS (JS heap, external)",
        "live JS heap per stream",
        "proxy CPU s",
        "complete",
        "lost",
        "late",
        "delay p50 / p99 / max ms",
        "min keep-alives",
        "in-flight after",
      ],
      s.rows.map((row) => [
        row.label,
        n(row.count, 0),
        n(row.held, 0),
        n(row.rampMs / 1000, 1),
        `${n(row.rssBeforeMiB, 1)} → ${n(row.rssHeldMiB, 1)}`,
        `${n(row.bytesPerStream / 1024, 1)} KiB` +
        (row.heapBytesPerStream === null
          ? ""
          : ` (${n(row.heapBytesPerStream / 1024, 1)}, ${
            n((row.externalBytesPerStream ?? 0) / 1024, 1)
          })`),
        row.liveHeapBytesPerStream == null ? "–" : `${n(row.liveHeapBytesPerStream / 1024, 1)} KiB`,
        n(row.proxyCpuSeconds, 1),
        n(row.completeStreams, 0),
        n(row.lostDeltas, 0),
        n(row.lateDeltas, 0),
        `${n(row.delayMs.p50, 2)} / ${n(row.delayMs.p99, 2)} / ${n(row.delayMs.max, 2)}`,
        String(row.keepAlivesMin),
        row.inflightAfter === null ? "–" : String(row.inflightAfter),
      ]),
    ),
    ...s.rows.filter((x) => x.errors).map((x) =>
      `\n- ${x.label} ${x.count}: ${x.errors} stream error(s), e.g. \`${x.errorExamples[0]}\``
    ),
  ].join("\n");
}

function writerRow(w: HistoryWriterRun): string[] {
  return [
    w.executor === "worker" ? "worker thread (as the gateway)" : "calling thread (contrast)",
    n(w.rows, 0),
    n(w.rowsPerSecond, 0),
    n(w.rowsPerBatch, 0),
    `${n(w.batchMs.p50)} / ${n(w.batchMs.p99)} / ${n(w.batchMs.max)}`,
    `${n(w.maxStallMs, 1)} / ${n(w.p99StallMs, 1)}`,
    `${n(w.idleStallMs.max, 1)} / ${n(w.idleStallMs.p99, 1)}`,
    `${n(w.backlogStallMs, 1)} ms`,
  ];
}

function history(r: BenchResults): string {
  const s = r.scenarios.historyWrites;
  const w = s.writer;
  const cpu = (row: HistoryUnderLoad) =>
    row.cpuUsPerRequest === null
      ? "–"
      : `${n(row.cpuUsPerRequest, 0)} (${n(row.workerCpuUsPerRequest, 0)})`;
  return [
    "## 5. History writes",
    "",
    `The batched writer alone (\`HistoryWriter\`, default batching) in a process of its own, ` +
    `into a fresh local libSQL file, fed finished request + attempt rows one batch at a time, ` +
    `then a backlog of ${n(w.backlogRows, 0)} rows queued at once. *Worker thread* is what the ` +
    `gateway does with a local file (\`workerExecutor\`, db/batch_executor.ts): a batch's time ` +
    `is its round trip to the worker, and the stall (how late a 5 ms timer on the writer's ` +
    `thread fired) is what building and posting the statements costs that thread` +
    (r.setup.loadCpus === null || r.setup.loadCpus.includes("-")
      ? ". "
      : `, plus any wait for its turn on the one core (CPU ${r.setup.loadCpus}) the job ` +
        `shares with its worker, as the gateway shares its own. `) +
    `*Calling thread* runs each batch there (\`inProcessExecutor\`, which the gateway uses ` +
    `only for remote databases), shown only to say what the worker takes off the serving ` +
    `thread. *Idle*: the same timer before any row, the stall this machine shows with nothing ` +
    `to do.`,
    "",
    table(
      [
        "batches run on",
        "rows",
        "rows/s",
        "rows per batch",
        "batch ms p50 / p99 / max",
        "stall max / p99 ms",
        "idle: stall max / p99 ms",
        "backlog: longest stall",
      ],
      [w, ...(s.writerInThread ? [s.writerInThread] : [])].map(writerRow),
    ),
    "",
    `Inside the gateway, serving the zero-delay route at concurrency ${s.underLoad.concurrency} ` +
    `for ${s.underLoad.seconds} s. Batches run on the writer's worker thread, so their times are ` +
    `the worker's, not stalls; the stall is the serving thread's (its 5 ms probe, how late it ` +
    `fired). CPU is the whole process's per request, and in brackets the worker thread's: both ` +
    `run on the proxy's one pinned core.`,
    "",
    table(
      [
        "gateway",
        "req/s",
        "rows written/s",
        "rows per request",
        "batches",
        "batch ms p50 / p99 / max",
        "CPU µs/request (worker)",
        "stall max / p99 ms",
        "stalls > 10 ms",
      ],
      s.underLoad.rows.map((row) => [
        row.target === "pulsegate" ? "history on" : "history off",
        n(row.rps, 0),
        n(row.rowsPerSecond, 0),
        n(row.rowsPerRequest, 2),
        n(row.batches, 0),
        row.batches ? `${n(row.batchMs.p50)} / ${n(row.batchMs.p99)} / ${n(row.batchMs.max)}` : "–",
        cpu(row),
        `${n(row.maxStallMs, 1)} / ${n(row.p99StallMs, 1)}`,
        n(row.stallsOver10ms, 0),
      ]),
    ),
    "",
    "Longest stall of pulsegate's serving thread at each throughput level of scenario 2 (ms):",
    "",
    table(
      ["concurrency", "history on", "history off"],
      (r.scenarios.throughput.rows.find((x) => x.target === "pulsegate")?.levels ?? []).map((l) => [
        String(l.concurrency),
        n(l.maxStallMs, 1),
        n(
          r.scenarios.throughput.rows.find((x) => x.target === "pulsegate_no_history")?.levels
            .find((o) => o.concurrency === l.concurrency)?.maxStallMs,
          1,
        ),
      ]),
    ),
  ].join("\n");
}

function profileTables(p: HotPathProfile, functions: number): string[] {
  return [
    table(
      ["function", "self %"],
      p.byFunction.slice(0, functions).map((h) => [`\`${h.name}\``, n(h.selfPercent, 1)]),
    ),
    "",
    table(["file", "self %"], p.byFile.map((h) => [`\`${h.name}\``, n(h.selfPercent, 1)])),
  ];
}

function hotPath(r: BenchResults): string {
  const p = r.hotPath;
  const st = r.hotPathStream ?? null;
  const held = r.hotPathHeld ?? null;
  if (!p && !st && !held) return "";
  return [
    "## Where pulsegate's CPU goes",
    "",
    `V8 CPU profiles of a fresh gateway's serving thread (history on), taken after the ` +
    `scenarios by an in-process \`node:inspector\` session (bench/self_profiler.ts): with the ` +
    `\`--inspect\` server attached instead, the runtime reports every fetch to the network panel ` +
    `and tees each response body for it, which inflated fetch and Web Streams in earlier ` +
    `profiles. Self time, as a share of all non-idle samples. The history writer's worker ` +
    `thread is not in them (see scenario 5 for its CPU). Line numbers are the profiler's: of ` +
    `the JavaScript the runtime made of each TypeScript file, so up to tens of lines before ` +
    `the function's line in the source (type declarations are gone).`,
    ...(p
      ? [
        "",
        `**Whole answers**: ${p.seconds} s at concurrency ${p.concurrency} on the 20 ms route ` +
        `(${n(p.rps, 0)} req/s under the profiler).`,
        "",
        ...profileTables(p, 25),
      ]
      : []),
    ...(st
      ? [
        "",
        `**Streams**: ${st.seconds} s at concurrency ${st.concurrency} on the streaming route ` +
        `(64 deltas 20 ms apart; ${n(st.rps, 1)} streams/s under the profiler).`,
        "",
        ...profileTables(st, 15),
      ]
      : []),
    ...(held
      ? [
        "",
        `**Held streams' content**: ${n(held.concurrency, 0)} streams held as in scenario 4, ` +
        `the profile summed over the ${held.seconds} s after the fake released them ` +
        `(${n(held.rps, 0)} frames/s relayed).`,
        "",
        ...profileTables(held, 15),
      ]
      : []),
  ].join("\n");
}

/** median (min–max), and the spread as a share of the median. */
function spreadCells(values: number[], floor?: number[]): string[] {
  const s = spreadOf(values);
  const ratio = floor?.length ? s.median / spreadOf(floor).median : NaN;
  return [
    `${n(s.median, 1)} (${n(s.min, 1)}–${n(s.max, 1)})`,
    `${n((100 * (s.max - s.min)) / s.median, 0)} %`,
    floor ? n(ratio, 2) : "–",
  ];
}

function historyAtScaleSection(r: BenchResults): string {
  const s = r.scenarios.historyAtScale;
  if (!s) return "";
  const millions = s.requests >= 1_000_000 ? `${n(s.requests / 1_000_000, 1)}M` : n(s.requests, 0);
  return [
    `## 7. History at ${millions} requests`,
    "",
    `A history of ${n(s.requests, 0)} requests over 28 days, shaped like the gateway's rows ` +
    `(bench/history_fill.ts: generated in ${n(s.fillSeconds, 1)} s), under a pulsegate process ` +
    `of its own: ${n(s.bytesPerRequest, 0)} bytes per request on disk ` +
    `(${n(s.bytes / 1024 / 1024, 0)} MiB). Each admin call the page makes, timed ` +
    `(docs/scaling.md "History at scale"):`,
    "",
    table(
      ["admin call", "status", "p50 ms", "max ms"],
      s.admin.map((a) => [a.name, String(a.status), n(a.p50Ms, 1), n(a.maxMs, 1)]),
    ),
    "",
    `A proxied answer (zero-delay route, one at a time): p99 ${n(s.proxiedP99Ms.alone, 2)} ms ` +
    `alone, ${n(s.proxiedP99Ms.duringAdmin, 2)} ms while the admin calls above ran back to back ` +
    `(${n(s.adminCallsDuring, 0)} calls); p50 ${n(s.proxiedP50Ms.alone, 2)} / ` +
    `${n(s.proxiedP50Ms.duringAdmin, 2)} ms.`,
  ].join("\n");
}

function liveViewSection(r: BenchResults): string {
  const s = r.scenarios.liveView;
  if (!s) return "";
  const tabs = s.browser ? `${s.tabs} tabs of ${s.browser}` : `${s.tabs} raw feeds (no browser)`;
  return [
    "## 8. The live view at scale",
    "",
    `Long healthy streams (one piece every 10 s) held on one pulsegate process, then split over ` +
    `two processes on one database (public URL and peer secret set), and the admin page's live ` +
    `list watched by ${tabs}, each figure over ${s.windowSeconds} s (docs/scaling.md "The live ` +
    `list of a fleet"). Bytes per tick: one tab's feed, a page (100 rows at most) or a ` +
    `heartbeat (target ≤ 64 KiB). CPU per tab: the gateways' CPU with the tabs open minus ` +
    `without, per tab, in % of one core (target ≤ 2 %). Long tasks: the busiest tab's share of ` +
    `its main thread in tasks over 50 ms (target ≤ 10 %). Find and abort: typing the id of a ` +
    `stream (on the other process, in the fleet) in Search to the abort's result (target ≤ 2 s).`,
    "",
    table(
      [
        "case",
        "streams running",
        "bytes per tick, mean / max",
        "heartbeats / ticks",
        "CPU % per tab",
        "CPU %, no tab",
        "/healthz p99 ms, no tab → 3 tabs",
        "long tasks",
        "find and abort, ms",
        "errors",
      ],
      s.cases.map((c) => [
        c.label,
        n(c.running, 0),
        `${n(c.bytesPerTick.mean, 0)} / ${n(c.bytesPerTick.max, 0)}`,
        `${c.bytesPerTick.heartbeats} / ${c.bytesPerTick.ticks}`,
        n(c.cpuPercentPerTab, 2),
        n(c.cpuPercentNoTab, 1),
        `${n(c.healthzP99Ms.none, 1)} → ${n(c.healthzP99Ms.threeTabs, 1)}`,
        c.longTaskShare === null ? "—" : `${n(c.longTaskShare * 100, 1)} %`,
        c.findAndAbortMs === null ? "—" : n(c.findAndAbortMs, 0),
        String(c.errors),
      ]),
    ),
  ].join("\n");
}

function cpuCostSection(r: BenchResults): string {
  const s = r.scenarios.cpuCost;
  if (!s) return "";
  const floor = s.rows.find((x) => x.target === "floor");
  return [
    "## 6. CPU cost, in repetitions",
    "",
    `CPU time of the proxy process (user + system, all threads) per streamed delta (${s.load.streams} ` +
    `streams of 64 deltas 20 ms apart at once) and per whole answer (zero-delay route, ` +
    `concurrency ${s.load.concurrency}, ${s.load.seconds} s), in ${s.reps} repetitions whose ` +
    `target order rotates. Each figure is the median (min–max) of the repetitions; _spread_ is ` +
    `max − min as a share of the median: a change smaller than it is not shown by this run. ` +
    `CPU is read from /proc (each live thread's \`schedstat\`, in ns). The JS relay floor is ` +
    `the floor with each chunk read and enqueued in JavaScript (bench/floor_proxy.ts): the least ` +
    `any relay that looks at every chunk pays on this runtime.`,
    "",
    table(
      [
        "target",
        "CPU µs per delta",
        "spread",
        "× floor",
        "CPU µs per whole answer",
        "spread",
        "× floor",
        "RSS after, MiB",
        "errors",
      ],
      s.rows.map((row) => [
        row.label,
        ...spreadCells(row.usPerDelta, floor?.usPerDelta),
        ...spreadCells(row.usPerRequest, floor?.usPerRequest),
        `${n(spreadOf(row.rssMiB).median, 1)}`,
        String(row.errors),
      ]),
    ),
  ].join("\n");
}

export function renderMarkdown(r: BenchResults): string {
  const sections = [
    "# Benchmarks",
    "",
    `Generated by \`deno task bench\`${
      r.profile === "quick" ? " --quick (a short run: figures are indicative only)" : ""
    } ` +
    `on ${r.startedAt.slice(0, 10)} in ${r.seconds} s; the raw figures are in ` +
    `[bench/results.json](../bench/results.json). Do not edit by hand: rerun the bench. ` +
    "What each round of work changed, with its same-run A/B figures, is in " +
    "[performance_log.md](performance_log.md), written by hand.",
    machine(r),
    targets(r),
    beforeAfter(r),
    addedLatency(r),
    oneCaller(r),
    throughput(r),
    streaming(r),
    held(r),
    history(r),
    cpuCostSection(r),
    historyAtScaleSection(r),
    liveViewSection(r),
    v8Trials(r),
    hotPath(r),
    methodSection(r),
  ];
  return sections.filter(Boolean).join("\n\n") + "\n";
}
