/**
 * Keeps a session on the upstream that last answered it (SPEC §4), so a
 * conversation's prompt cache stays warm. Bounded: the oldest sessions go first.
 */
export class Affinity {
  #bySession = new Map<string, string>();

  constructor(private max = 100_000) {}

  get(sessionId: string | null): string | undefined {
    return sessionId === null ? undefined : this.#bySession.get(sessionId);
  }

  set(sessionId: string | null, upstream: string): void {
    if (sessionId === null) return;
    this.#bySession.delete(sessionId);
    this.#bySession.set(sessionId, upstream);
    if (this.#bySession.size > this.max) {
      const oldest = this.#bySession.keys().next().value;
      if (oldest !== undefined) this.#bySession.delete(oldest);
    }
  }

  drop(sessionId: string | null, upstream: string): void {
    if (sessionId !== null && this.#bySession.get(sessionId) === upstream) {
      this.#bySession.delete(sessionId);
    }
  }
}
