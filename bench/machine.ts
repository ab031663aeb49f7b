import type { Machine } from "./results.ts";
import type { Layout } from "./services.ts";

async function readOr(path: string, fallback: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return fallback;
  }
}

async function commandLine(cmd: string, args: string[]): Promise<string | null> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).output();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  } catch {
    return null;
  }
}

/** The machine the figures were taken on, as the doc describes it. */
export async function describeMachine(): Promise<Machine> {
  const cpuinfo = await readOr("/proc/cpuinfo", "");
  const meminfo = await readOr("/proc/meminfo", "");
  const memKb = Number(/MemTotal:\s+(\d+) kB/.exec(meminfo)?.[1] ?? NaN);
  const limit = await commandLine("sh", ["-c", "ulimit -Hn"]);
  return {
    cpus: navigator.hardwareConcurrency,
    cpuModel: /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1]?.trim() ?? "unknown",
    memoryGiB: Math.round((memKb / 1024 / 1024) * 10) / 10,
    kernel: `${Deno.build.os} ${Deno.osRelease()}`,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    node: await commandLine("node", ["--version"]),
    fileLimit: limit === null || limit === "unlimited" ? null : Number(limit),
  };
}

/** Where the proxy and the load go: one core each when there are two or more and taskset. */
export async function pinning(cpus: number): Promise<{ proxy: string; load: string } | null> {
  if (cpus < 2) return null;
  const taskset = await commandLine("taskset", ["-c", "0", "true"]);
  if (taskset === null) return null;
  return { proxy: "0", load: cpus > 2 ? `1-${cpus - 1}` : "1" };
}

/** Where a bench run's processes go (see `pinning`), and where their logs are written. */
export async function benchLayout(opts: { cpus: number; logDir: string }): Promise<Layout> {
  const pins = await pinning(opts.cpus);
  return {
    proxyCpus: pins?.proxy ?? null,
    loadCpus: pins?.load ?? null,
    nofile: 65_536,
    logDir: opts.logDir,
  };
}

/** CPU time, in ms: the whole machine's busy time and this process's own plus its children's. */
export interface CpuSnapshot {
  machineBusyMs: number;
  oursMs: number;
}

/**
 * Reads /proc/stat and /proc/self/stat. Children's time counts once they are reaped, and every
 * bench process is a child that the bench waits for, so after the run `oursMs` covers them all;
 * the rest of the machine's busy time belongs to whatever else ran meanwhile.
 */
export async function cpuSnapshot(): Promise<CpuSnapshot> {
  const TICK_MS = 10; // USER_HZ = 100
  const stat = await readOr("/proc/stat", "");
  const cpu = (/^cpu\s+(.+)$/m.exec(stat)?.[1] ?? "").split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal
  const busy = [0, 1, 2, 5, 6, 7].reduce((sum, i) => sum + (cpu[i] ?? 0), 0);
  const self = await readOr("/proc/self/stat", "");
  const fields = self.slice(self.lastIndexOf(")") + 2).split(" ").map(Number);
  const ours = (fields[11] ?? 0) + (fields[12] ?? 0) + (fields[13] ?? 0) + (fields[14] ?? 0);
  return { machineBusyMs: busy * TICK_MS, oursMs: ours * TICK_MS };
}

/** Share of one core other processes used over `windowMs`, from two CPU snapshots. */
export async function otherLoad(windowMs: number): Promise<number> {
  const before = await cpuSnapshot();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  const after = await cpuSnapshot();
  const busy = after.machineBusyMs - before.machineBusyMs - (after.oursMs - before.oursMs);
  return Math.max(0, (100 * busy) / (performance.now() - started));
}

/**
 * Waits (at most `maxMs`) for other work on the machine to drop under `quietPercent` of a core,
 * so the figures measure the proxies rather than a neighbour. Answers the last reading.
 */
export async function waitForQuiet(
  opts: { maxMs: number; quietPercent: number; log(message: string): void },
): Promise<number> {
  const deadline = performance.now() + opts.maxMs;
  let load = await otherLoad(2_000);
  while (load > opts.quietPercent && performance.now() < deadline) {
    opts.log(`other processes use ${Math.round(load)} % of a core; waiting for a quieter moment`);
    load = await otherLoad(3_000);
  }
  return Math.round(load);
}
