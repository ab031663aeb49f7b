/**
 * CPU a process has used, split by thread, from /proc: the serving (main) thread, Deno `Worker`
 * threads (named `worker-N`; the history writer's database thread is one) and the rest (the
 * runtime's I/O and V8 helper threads). Linux only; null elsewhere.
 */

const CLOCK_TICKS_PER_SEC = 100;

export interface ThreadCpu {
  mainMs: number;
  workerMs: number;
  totalMs: number;
}

function ticksMs(stat: string): number {
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SEC;
}

export async function threadCpu(pid: number = Deno.pid): Promise<ThreadCpu | null> {
  const dir = `/proc/${pid}/task`;
  const out: ThreadCpu = { mainMs: 0, workerMs: 0, totalMs: 0 };
  try {
    for await (const entry of Deno.readDir(dir)) {
      try {
        const [comm, stat] = await Promise.all([
          Deno.readTextFile(`${dir}/${entry.name}/comm`),
          Deno.readTextFile(`${dir}/${entry.name}/stat`),
        ]);
        const ms = ticksMs(stat);
        out.totalMs += ms;
        if (Number(entry.name) === pid) out.mainMs += ms;
        else if (/^worker-\d+/.test(comm.trim())) out.workerMs += ms;
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  } catch {
    return null;
  }
  return out;
}

/** Each thread of a measured process as last read: its run time (ns) and its ticks (ms). */
const seenThreads = new Map<number, Map<string, { ns: number; ticksMs: number }>>();

/**
 * User + system CPU time a process has used, in ms, to the microsecond where Linux allows: each
 * thread's run time from `schedstat` (nanoseconds) as last read, an exited one's kept at its
 * last reading, plus what the process's own ticks (10 ms each) hold beyond those threads' ticks
 * (threads that came and went between two readings). Ticks alone made the floor's CPU per delta
 * a count of three or four ticks (docs/benchmarks.md). An exited thread's precise time once gave
 * way to its sampled ticks at the next reading, which can be far fewer: a difference of two
 * readings came out negative (the quick bench's floor, beside a burned core).
 */
export async function processCpuMs(pid: number): Promise<number> {
  const total = ticksMs(await Deno.readTextFile(`/proc/${pid}/stat`));
  let threads = seenThreads.get(pid);
  if (!threads) seenThreads.set(pid, threads = new Map());
  for await (const entry of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      const dir = `/proc/${pid}/task/${entry.name}`;
      const [stat, sched] = await Promise.all([
        Deno.readTextFile(`${dir}/stat`),
        Deno.readTextFile(`${dir}/schedstat`),
      ]);
      threads.set(entry.name, { ns: Number(sched.split(" ")[0]), ticksMs: ticksMs(stat) });
    } catch {
      // The thread ended between the listing and the read: its last reading stands.
    }
  }
  let ns = 0;
  let seenTicks = 0;
  for (const thread of threads.values()) {
    ns += thread.ns;
    seenTicks += thread.ticksMs;
  }
  return ns / 1e6 + Math.max(0, total - seenTicks);
}
