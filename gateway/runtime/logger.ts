import { type Clock, REAL_TIME } from "./clock.ts";

/** One JSON line per event on stderr. Callers never pass secrets here. */
export interface Logger {
  event(name: string, fields?: Record<string, unknown>): void;
}

export function createLogger(opts: { quiet?: boolean; clock?: Clock } = {}): Logger {
  const clock = opts.clock ?? REAL_TIME;
  return {
    event(name, fields = {}) {
      if (opts.quiet) return;
      const at = new Date(clock.now()).toISOString();
      console.error(JSON.stringify({ at, event: name, ...fields }));
    },
  };
}
