/** The "How it was measured" part of docs/benchmarks.md: fixed text around the run's setup. */
import type { BenchResults } from "../results.ts";

export function methodSection(r: BenchResults): string {
  const s = r.setup;
  return [
    "## How it was measured",
    "",
    "- **Processes.** Every party is its own process: the fake upstream " +
    "(`bench/fake_upstream.ts`, Deno.serve), the floor (`bench/floor_proxy.ts`: Deno.serve + " +
    "fetch, nothing else; the fetch body goes to Deno.serve as is, which pipes it in Rust), the " +
    "JS relay floor (the same file with `BENCH_FLOOR_MODE=js`: it reads each upstream chunk in " +
    "JavaScript and enqueues it into a stream of its own, pull-based with a high-water mark of " +
    "1, which Deno.serve pumps chunk by chunk: the least any relay that looks at every chunk " +
    "pays on this runtime), pulsegate (`bench/gateway_entry.ts`, which calls `startGateway` as " +
    "`main.ts` does), Portkey (`node build/start-server.js`) and each load generator. " +
    (s.proxyCpus
      ? `Each is started as \`sh -c 'ulimit -n …; exec taskset -c CPU …'\`: proxies on CPU ` +
        `${s.proxyCpus}, the fake and the load generators on CPU ${s.loadCpus}, so every proxy ` +
        "gets one core of its own and the same one. The orchestrator (`bench/main.ts`) only " +
        "waits while a measurement runs."
      : "No pinning was possible on this machine."),
    `- **Load generators.** ${s.loadGenerator}. Scenario 1 sends one request at a time over one ` +
    "keep-alive connection per target, targets alternated in rounds whose order rotates; " +
    "scenario 9 does the same with whole and streamed answers as units of their own (every " +
    "target and kind in one job, the floor's same kind the reference), then whole answers at " +
    "64 connections with the targets alternating over repetitions; " +
    "scenario 2 runs concurrency levels as the outer loop and, within each level, runs every " +
    "target once in an order that rotates from level to level, so no target gets a quiet or a " +
    "busy minute of the machine to itself. Its zero-delay sweep (requests/s at p99 under 20 ms, " +
    "as published gateway comparisons count it) does the same with the floor and pulsegate " +
    "alone, so the two alternate level by level; since levels double, its figure (like the " +
    "50 ms one) is the best level that held, not the exact point where p99 reaches the bound.",
    `- **Peer.** ${s.peer ?? "Portkey could not be installed or run here"}` +
    (s.peer
      ? ", run with Node, routed to the fake with `x-portkey-provider: openai` and " +
        "`x-portkey-custom-host`."
      : "."),
    `- **History off.** ${s.historyOff}. History on is the gateway as shipped: ${s.database}.`,
    "- **Pulsegate's probe.** During scenarios 2 and 5 only, both pulsegate processes run a " +
    "5 ms interval timer (`bench/loop_probe.ts`) on the serving thread; how late it fires is " +
    "the event-loop stall. History batches run on the writer's worker thread, not this one, " +
    "but both share the proxy's one pinned core, so the worker's CPU can still delay it. " +
    "It costs ~200 wake-ups/s, which shows in CPU per request at the lowest concurrencies.",
    "- **CPU.** Per request and per delta: the proxy process's user + system time (all its " +
    "threads, pulsegate's history worker included) from /proc across the run (each live " +
    "thread's `schedstat`, in ns, plus exited threads' ticks from `/proc/PID/stat`), divided by " +
    "what it served; at low concurrency fixed " +
    "per-wake-up costs dominate, so compare at the busy levels.",
    "- **Repetitions.** Scenario 6 measures CPU per delta and per whole answer of the floor, " +
    "the JS relay floor and pulsegate several times, the target order rotating; each figure is " +
    "the median with its min–max, so a change smaller than that spread is not shown by a run.",
    "- **Held memory.** Scenario 4 reads resident memory from /proc and the JS heap without a GC " +
    "while the timed streams are held, so garbage counts there. The held-heap target is read " +
    "apart: once the timed content is through, the same gateway (started with " +
    "`--v8-flags=--expose-gc`) holds as many streams again, and its heap is read after a full " +
    "GC (`/stats?gc=1` on its control port, bench/gateway_entry.ts) before and while they are " +
    "held; then they are cancelled. No GC is forced before the timed content, which would start " +
    "it on a freshly collected heap.",
    "- **Developer tools.** Besides the bench, for judging one change: " +
    "`deno run -A bench/cpu_ab.ts [--base DIR] [--reps 3] [--streams 128] [--rounds 2] " +
    "[--seconds 2] [--concurrency 16]` runs scenario 6's measure (CPU per delta and per whole " +
    "answer) on the floor, the JS relay floor, this checkout's gateway and, with `--base`, " +
    "another checkout's (e.g. `git archive main | tar -x -C DIR`) in alternating repetitions, " +
    "and prints each median with its min–max; " +
    "`deno run -A bench/held_heap.ts [--count 500] [--top 30] [--only PREFIX] [--base DIR]` " +
    "holds `--count` streams through a fresh gateway and prints the JS heap one held stream " +
    "adds, by V8 node type and constructor (objects, closures and promises per stream), from " +
    "heap snapshots before and while they are held; " +
    "`deno run -A bench/profile_gateway.ts --route stream64|zero|delay20|stream8` profiles one " +
    "route in a minute (`PROF_DUMP=FILE` keeps the raw profile, for a call-tree view), then " +
    "counts what one request allocates on the serving thread, objects and bytes and the sites " +
    "that allocate most, from V8's sampling heap profiler with collected objects included " +
    "(bench/alloc_profile.ts; run it in two checkouts for allocations before → after); " +
    "`bench/cpu_ab.ts --latency N` adds scenario 9's one-at-a-time measure to each repetition, " +
    "and `--v8 FLAGS --base <this checkout>` judges a V8 setting against none (the trials " +
    "above). A bench gateway " +
    "also writes a heap snapshot on `POST /heap/snapshot?path=FILE` at its control port.",
    "- **Time scale.** Only scenario 4 scales time (`PULSEGATE_TIME_SCALE`), to make the 15 s " +
    "opening hold and keep-alive interval short enough to hold thousands of streams in seconds.",
    "- **File limit.** Each spawned process raises its soft `ulimit -n` (to the hard limit " +
    "when more is refused), so 5,000 held streams (10,000 sockets in the proxy) fit; pulsegate " +
    "is started with `PULSEGATE_MAX_CONNECTIONS=20000` (its default cap of 4,096 client " +
    "connections would answer the last 904 with 503).",
    "- **Traffic.** Only 127.0.0.1; every loop is bounded by a count and a deadline.",
    ...s.notes.map((note) => `- **Note.** ${note}`),
    "",
    "Reproduce: `deno task bench` (full, about 12 minutes on 2 cores) or `deno task bench " +
    "--quick` (about a minute; `tests/bench_quick_test.ts` runs it with `--no-peer`, which " +
    "leaves Portkey out, into a temp directory); " +
    "`deno task bench --render` rewrites this doc from bench/results.json without measuring. " +
    "autocannon and Portkey are installed with npm on first use into `~/.cache/pulsegate-bench` " +
    "(or `$PULSEGATE_BENCH_TOOLS`).",
  ].join("\n");
}
