/** One JSON line per event on stderr. Callers never pass secrets here. */
export interface Logger {
  event(name: string, fields?: Record<string, unknown>): void;
}

export function createLogger(opts: { quiet?: boolean } = {}): Logger {
  return {
    event(name, fields = {}) {
      if (opts.quiet) return;
      console.error(JSON.stringify({ at: new Date().toISOString(), event: name, ...fields }));
    },
  };
}
