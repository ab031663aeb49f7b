import type { ConnectionHandler, ConnectionServer } from "./serve_on_connection.ts";

/**
 * The client connections of one process (docs/deploy.md "Connection limits"): how many are open,
 * which are waiting for a request and since when, and which have a request in flight.
 *
 * A waiting connection sits in one of two insertion-ordered sets, `fresh` (accepted, no request
 * yet: the headers bound) or `idle` (between requests: the keep-alive bound). A connection joins
 * the end of its set when it starts waiting and leaves it when a request arrives, so each set is
 * ordered by how long its members have waited: the sweep stops at the first one still in time,
 * and the oldest waiting connection (the one to evict) is at the head of one of them. A request
 * costs two set operations and one `completed` callback; nothing here walks every connection.
 */
export class ClientConnections {
  readonly #fresh = new Set<Entry>();
  readonly #idle = new Set<Entry>();
  readonly #all = new Set<Entry>();
  #closing = 0;

  constructor(
    private readonly limits: {
      max: number;
      headersMs: number;
      keepAliveMs: number;
    },
    /** Monotonic: the sets' order must not follow the wall clock backwards. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Connections whose socket is open, those being closed included. */
  get open(): number {
    return this.#all.size;
  }

  /** Whether one more connection fits under the cap (those being closed do not count). */
  hasRoom(): boolean {
    return this.#all.size - this.#closing < this.limits.max;
  }

  /**
   * Serves an accepted connection: `start` gets the handler to serve it with (the app's, counted)
   * and returns Deno's server for it. Resolves when the connection is closed.
   */
  track(
    handler: ConnectionHandler,
    start: (counted: ConnectionHandler) => ConnectionServer,
  ): Promise<void> {
    const entry = new Entry(this.now());
    const done = () => this.#ended(entry);
    const counted: ConnectionHandler = (request, info) => {
      this.#began(entry);
      info.completed.then(done, done);
      return handler(request, info);
    };
    this.#all.add(entry);
    this.#wait(entry, this.#fresh);
    try {
      entry.server = start(counted);
    } catch (err) {
      this.#forget(entry);
      throw err;
    }
    // An I/O error on one connection (a reset mid-response) is that connection's end, nothing more.
    return entry.server.finished.catch(() => {}).finally(() => this.#forget(entry));
  }

  /** Closes every waiting connection past its bound; returns how many. */
  sweep(): number {
    const now = this.now();
    return this.#expire(this.#fresh, now - this.limits.headersMs) +
      this.#expire(this.#idle, now - this.limits.keepAliveMs);
  }

  /**
   * Closes the connection that has waited longest for a request, if it has waited at least
   * `minWaitMs` (real ms): at the cap, or when the process is out of descriptors, a connection
   * that sends nothing gives way to one that may. True when one was closed.
   */
  evictOldest(minWaitMs: number): boolean {
    const fresh = first(this.#fresh);
    const idle = first(this.#idle);
    const oldest = !fresh ? idle : !idle ? fresh : fresh.since <= idle.since ? fresh : idle;
    if (!oldest || this.now() - oldest.since < minWaitMs) return false;
    this.#close(oldest);
    return true;
  }

  /**
   * Gateway shutdown: waiting connections close now, each busy one after its response. Resolves
   * when all are closed.
   */
  async closeAll(): Promise<void> {
    const all = [...this.#all];
    for (const entry of all) this.#close(entry);
    await Promise.all(all.map((entry) => entry.server?.finished.catch(() => {})));
  }

  #began(entry: Entry): void {
    if (entry.inFlight++ === 0 && entry.waiting) {
      entry.waiting.delete(entry);
      entry.waiting = null;
    }
  }

  #ended(entry: Entry): void {
    if (--entry.inFlight > 0 || entry.closing) return;
    entry.since = this.now();
    this.#wait(entry, this.#idle);
  }

  #wait(entry: Entry, set: Set<Entry>): void {
    set.add(entry);
    entry.waiting = set;
  }

  #expire(set: Set<Entry>, waitingSince: number): number {
    let closed = 0;
    for (const entry of set) {
      if (entry.since > waitingSince) break;
      this.#close(entry);
      closed++;
    }
    return closed;
  }

  #close(entry: Entry): void {
    if (entry.closing) return;
    entry.closing = true;
    this.#closing++;
    entry.waiting?.delete(entry);
    entry.waiting = null;
    // Graceful: closes a waiting connection at once, a busy one after its response.
    entry.server?.shutdown().catch(() => {});
  }

  #forget(entry: Entry): void {
    if (!this.#all.delete(entry)) return;
    if (entry.closing) this.#closing--;
    entry.waiting?.delete(entry);
    entry.waiting = null;
  }
}

class Entry {
  server: ConnectionServer | null = null;
  inFlight = 0;
  closing = false;
  /** The set it waits in; null while a request is in flight or once it is being closed. */
  waiting: Set<Entry> | null = null;
  constructor(public since: number) {}
}

function first(set: Set<Entry>): Entry | undefined {
  for (const entry of set) return entry;
  return undefined;
}
