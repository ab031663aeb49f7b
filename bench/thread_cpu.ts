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
