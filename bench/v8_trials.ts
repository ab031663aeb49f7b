/**
 * V8 settings tried on the gateway (GC tuning): each trial is one `bench/cpu_ab.ts --v8 FLAGS
 * --base <this checkout> --latency N --json bench/v8_trials/NAME.json` run, this tree's gateway
 * with the flags against the same tree without them, alternating in repetitions with the floors.
 * A setting wins only when it is better in every repetition, on CPU per whole answer and on the
 * one-caller p99 of whole and of streamed answers (differences within a repetition, so a
 * neighbour's burst weighs on both); only a winner ships (on the server's command line in
 * launch.ts).
 * docs/benchmarks.md lists every trial kept in bench/v8_trials/, winners and losers, with figures.
 */

/** What `bench/cpu_ab.ts --json` writes: each figure per target, one per repetition. */
export interface AbRun {
  command: string;
  /** The flags this tree's gateway ran with (`--v8`); the base ran without. */
  v8: string;
  startedAt: string;
  /** 1-minute load average of the machine before and after. */
  loadAverage: { start: number; end: number };
  reps: number;
  usPerDelta: Record<string, number[]>;
  usPerRequest: Record<string, number[]>;
  rps: Record<string, number[]>;
  rssMiB: Record<string, number[]>;
  /** Keyed `target:whole` / `target:streamed`; absent without `--latency`. */
  p50Ms: Record<string, number[]>;
  p99Ms: Record<string, number[]>;
}

/** Each repetition's this-tree-minus-base difference of one figure; negative is better. */
export function diffs(by: Record<string, number[]>, key: (target: string) => string): number[] {
  const mine = by[key("pulsegate")] ?? [];
  const theirs = by[key("base")] ?? [];
  return mine.map((x, i) => x - (theirs[i] ?? NaN));
}

export interface TrialVerdict {
  cpuRequest: number[];
  cpuDelta: number[];
  p99Whole: number[];
  p99Streamed: number[];
  p50Whole: number[];
  rss: number[];
  /** Better on CPU per whole answer and on both p99s in every repetition. */
  wins: boolean;
}

export function judgeTrial(run: AbRun): TrialVerdict {
  const same = (t: string) => t;
  const v = {
    cpuRequest: diffs(run.usPerRequest, same),
    cpuDelta: diffs(run.usPerDelta, same),
    p99Whole: diffs(run.p99Ms, (t) => `${t}:whole`),
    p99Streamed: diffs(run.p99Ms, (t) => `${t}:streamed`),
    p50Whole: diffs(run.p50Ms, (t) => `${t}:whole`),
    rss: diffs(run.rssMiB, same),
  };
  const better = (xs: number[]) => xs.length === run.reps && xs.every((x) => x < 0);
  return {
    ...v,
    wins: better(v.cpuRequest) && better(v.p99Whole) && better(v.p99Streamed),
  };
}

/** Every trial kept in `dir` (one JSON file each), oldest first; none when there is no dir. */
export async function readTrials(dir: string): Promise<AbRun[]> {
  const runs: AbRun[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (!entry.isFile || !entry.name.endsWith(".json")) continue;
      runs.push(JSON.parse(await Deno.readTextFile(`${dir}/${entry.name}`)) as AbRun);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return runs.sort((a, b) => a.startedAt.localeCompare(b.startedAt));
}
