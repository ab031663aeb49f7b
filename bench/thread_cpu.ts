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

/**
 * A measured process as last read: each thread's run time (ns) and ticks (ms), and the ticks of
 * threads that came and went between readings.
 */
interface Seen {
  threads: Map<string, { ns: number; ticksMs: number }>;
  residualMs: number;
}

const seenProcesses = new Map<number, Seen>();

/**
 * User + system CPU time a process has used, in ms, to the microsecond where Linux allows: each
 * thread's run time from `schedstat` (nanoseconds) as last read, an exited one's kept at its
 * last reading, plus what the process's own ticks (10 ms each) hold beyond those threads' ticks
 * (threads that came and went between two readings). Ticks alone made the floor's CPU per delta
 * a count of three or four ticks (docs/benchmarks.md).
 *
 * Both parts only grow from one reading to the next, as CPU time does. The process's ticks and
 * the sum of its threads' are each rounded on their own, so their difference moves by a few
 * ticks either way between readings; taken as it came, it once made a difference of two readings
 * negative (the quick bench's floor, -27.1 µs per delta beside a burned core).
 */
export async function processCpuMs(pid: number): Promise<number> {
  const total = ticksMs(await Deno.readTextFile(`/proc/${pid}/stat`));
  let seen = seenProcesses.get(pid);
  if (!seen) seenProcesses.set(pid, seen = { threads: new Map(), residualMs: 0 });
  for await (const entry of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      const dir = `/proc/${pid}/task/${entry.name}`;
      const [stat, sched] = await Promise.all([
        Deno.readTextFile(`${dir}/stat`),
        Deno.readTextFile(`${dir}/schedstat`),
      ]);
      seen.threads.set(entry.name, { ns: Number(sched.split(" ")[0]), ticksMs: ticksMs(stat) });
    } catch {
      // The thread ended between the listing and the read: its last reading stands.
    }
  }
  let ns = 0;
  let seenTicks = 0;
  for (const thread of seen.threads.values()) {
    ns += thread.ns;
    seenTicks += thread.ticksMs;
  }
  seen.residualMs = Math.max(seen.residualMs, total - seenTicks);
  return ns / 1e6 + seen.residualMs;
}
