import type { LiveRequest } from "./live_request.ts";

/**
 * The live requests of this process, by id and by session. Each request
 * registers when it starts and drops out with its end; throwing a switch
 * aborts its signal with the reason given.
 */
export class AbortRegistry {
  #byId = new Map<string, LiveRequest>();

  get size(): number {
    return this.#byId.size;
  }

  /** False when the id is already live (docs/design.md "Client API": 409). */
  add(live: LiveRequest): boolean {
    if (this.#byId.has(live.record.id)) return false;
    this.#byId.set(live.record.id, live);
    return true;
  }

  drop(live: LiveRequest): void {
    if (this.#byId.get(live.record.id) === live) this.#byId.delete(live.record.id);
  }

  get(id: string): LiveRequest | undefined {
    return this.#byId.get(id);
  }

  has(id: string): boolean {
    return this.#byId.has(id);
  }

  all(): LiveRequest[] {
    return [...this.#byId.values()];
  }

  inSession(sessionId: string): LiveRequest[] {
    return this.all().filter((l) => l.record.sessionId === sessionId);
  }

  /** Aborts the given requests; answers the ids that were still running. */
  abort(list: LiveRequest[], reason: () => Error): string[] {
    const stopped: string[] = [];
    for (const live of list) {
      if (live.signal.aborted || live.finished) continue;
      live.abort(reason());
      stopped.push(live.record.id);
    }
    return stopped;
  }
}
