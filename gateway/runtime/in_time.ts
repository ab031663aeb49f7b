import type { Clock } from "./clock.ts";

/**
 * `work`, or a rejection once `ms` (configured, so scaled by the clock) have passed without it:
 * a lookup a request waits on must never hold it for as long as a database takes to answer. The
 * timer is cancelled as soon as either settles.
 */
export async function inTime<T>(work: Promise<T>, opts: { clock: Clock; ms: number }): Promise<T> {
  let cancel = () => {};
  const late = new Promise<never>((_, reject) => {
    cancel = opts.clock.after(opts.ms, () => reject(new Error("no answer in time")));
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    cancel();
  }
}
