/** The nice value of one thread's `stat` line (field 19; the command name may hold spaces). */
function niceOf(stat: string): number {
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

/** The nice value of each of this process's threads (Linux /proc), skipping one that just ended. */
export function threadNices(): number[] {
  const nices: number[] = [];
  for (const task of Deno.readDirSync("/proc/self/task")) {
    try {
      nices.push(niceOf(Deno.readTextFileSync(`/proc/self/task/${task.name}/stat`)));
    } catch {
      // A thread that ended while the folder was read.
    }
  }
  return nices;
}

/** The calling thread's own nice value. */
export function ownNice(): number {
  return niceOf(Deno.readTextFileSync("/proc/thread-self/stat"));
}
