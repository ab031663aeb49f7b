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
    "scenario 2 runs concurrency levels as the outer loop and rotates the target order per level.",
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
    "the JS relay floor and pulsegate several times, the target order rotating; each figure is the median with " +
    "its min–max, so a change smaller than that spread is not shown by a run. For a " +
    "before/after on a busy machine, `bench/cpu_ab.ts --base DIR` runs the same measure on " +
    "this checkout and another (e.g. `git archive main | tar -x -C DIR`) in alternation, and " +
    "`bench/profile_gateway.ts --route stream64|zero|delay20` profiles one route in a minute " +
    "(`PROF_DUMP=FILE` keeps the raw profile, for a call-tree view). A bench gateway also " +
    "writes a heap snapshot on `POST /heap/snapshot?path=FILE` at its control port " +
    "(bench/gateway_entry.ts): compare two, taken before and while streams are held, to see " +
    "what a held stream keeps alive.",
    "- **Time scale.** Only scenario 4 scales time (`PULSEGATE_TIME_SCALE`), to make the 15 s " +
    "opening hold and keep-alive interval short enough to hold thousands of streams in seconds.",
    "- **File limit.** Each spawned process raises its soft `ulimit -n` (to the hard limit " +
    "when more is refused), so 5,000 held streams (10,000 sockets in the proxy) fit.",
    "- **Traffic.** Only 127.0.0.1; every loop is bounded by a count and a deadline.",
    ...s.notes.map((note) => `- **Note.** ${note}`),
    "",
    "Reproduce: `deno task bench` (full, about 11 minutes on 2 cores) or `deno task bench " +
    "--quick` (under a minute; `tests/bench_quick_test.ts` runs it into a temp directory); " +
    "`deno task bench --render` rewrites this doc from bench/results.json without measuring. " +
    "autocannon and Portkey are installed with npm on first use into `~/.cache/pulsegate-bench` " +
    "(or `$PULSEGATE_BENCH_TOOLS`).",
  ].join("\n");
}
