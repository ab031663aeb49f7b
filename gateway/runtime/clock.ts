/**
 * The one place the gateway waits. Every duration is given in real-world
 * milliseconds as configured and multiplied by `scale` here, so tests run a
 * 30 s idle timeout in a fraction of a second without touching the config.
 */
export interface Clock {
  readonly scale: number;
  now(): number;
  /** Runs `fn` after `ms` (scaled). Returns a cancel function. */
  after(ms: number, fn: () => void): () => void;
  /** Resolves after `ms` (scaled); rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Converts a scaled wait back to configured milliseconds, for reporting. */
  unscale(realMs: number): number;
}

export function createClock(scale = 1): Clock {
  if (!(scale > 0)) throw new RangeError(`time scale must be positive, got ${scale}`);
  const real = (ms: number) => Math.max(0, ms * scale);
  return {
    scale,
    now: () => Date.now(),
    after(ms, fn) {
      const id = setTimeout(fn, real(ms));
      return () => clearTimeout(id);
    },
    sleep(ms, signal) {
      return new Promise((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const onAbort = () => {
          clearTimeout(id);
          reject(signal?.reason);
        };
        const id = setTimeout(() => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        }, real(ms));
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
    unscale: (realMs) => realMs / scale,
  };
}
