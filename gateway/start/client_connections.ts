import { REAL_TIME, workMs } from "../runtime/clock.ts";
import type { ConnectionHandler, ConnectionServer } from "./serve_on_connection.ts";
import { closingAnswer, declaresBody, leavesBodyUnread } from "./unread_body.ts";

/** How often a connection that has had requests is looked at, as a share of the keep-alive bound. */
const LOOKS_PER_BOUND = 4;
/** At most this many busy connections are looked past when evicting one. */
const EVICT_LOOKS = 16;
/**
 * How long a connection answered before its request body was read stays open after the answer
 * (docs/deploy.md "Answers before the body"). Deno closes it sooner itself once the client has sent
 * the rest; the wait lets the answer reach the client before a close that would reset it (closing
 * with unread bytes sends a reset), as the refusal at the cap waits (refuse_connection.ts).
 */
export const UNREAD_BODY_LINGER_MS = 2_000;

/**
 * The client connections of one process (docs/deploy.md "Connection limits"): how many are open,
 * which wait for their first request and since when, and which sit idle between requests.
 *
 * A request costs three field writes and a look at its headers here, nothing more: no timer, no
 * promise, no clock read (a `completed` callback per request measured 2-3 µs of CPU on the
 * gateway's cheapest route). The sweep does the rest:
 * - `fresh` holds connections with no request yet, in accept order; the sweep closes those past
 *   the headers bound from the head and stops at the first in time.
 * - `used` holds the others, in the order they were last looked at; each is looked at about
 *   every quarter of the keep-alive bound. A look sees whether the latest request has ended
 *   (`requestEnded`) and whether another came since the last look; a connection seen idle, with
 *   no request since, for the keep-alive bound is closed. So it is closed between one and one and
 *   a quarter bounds (plus a sweep) after its last response, never before.
 *
 * A request that declares a body costs a promise more: an answer given before its body was read
 * to the end says `connection: close`, and the connection is closed `lingerMs` after the answer
 * was handed over (unread_body.ts), which neither bound above could do: Deno waits for the rest
 * of the body first.
 */
export class ClientConnections {
  readonly #fresh = new Set<Entry>();
  readonly #used = new Set<Entry>();
  readonly #all = new Set<Entry>();
  readonly #lookEvery: number;
  #closing = 0;
  #probeChecked = false;

  constructor(
    private readonly limits: {
      max: number;
      headersMs: number;
      keepAliveMs: number;
      /** After an answer that left body bytes unread (default `UNREAD_BODY_LINGER_MS`). */
      lingerMs?: number;
    },
    private readonly opts: {
      /** Told once if Deno no longer lets `requestEnded` see a request's end (see there). */
      onProbeBroken?: () => void;
      /** Monotonic: the sets' order must not follow the wall clock backwards. */
      now?: () => number;
      /** Runs `fn` after `ms`, answering its cancel (`Clock.after`'s shape); default a timer. */
      after?: (ms: number, fn: () => void) => () => void;
    } = {},
  ) {
    this.#lookEvery = limits.keepAliveMs / LOOKS_PER_BOUND;
  }

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
    const entry = new Entry(this.#now());
    const counted: ConnectionHandler = (request, info) => {
      entry.latest = info;
      // Another request on the connection (HTTP/2's next stream; HTTP/1.1 takes none after
      // `connection: close`): no body is holding it.
      entry.bodyDue = false;
      if (entry.requests++ === 0) this.#firstRequest(entry, info);
      const answer = handler(request, info);
      if (!declaresBody(request)) return answer;
      const seen = entry.requests;
      const answered = (response: Response) => {
        if (!leavesBodyUnread(request)) return response;
        this.#closeAfterAnswer(entry, { info, seen });
        return closingAnswer(response);
      };
      if (!(answer instanceof Promise)) return answered(answer);
      return answer.then(answered, (err) => {
        // Deno answers with the server's onError: the body is as unread.
        if (leavesBodyUnread(request)) this.#closeAfterAnswer(entry, { info, seen });
        throw err;
      });
    };
    this.#all.add(entry);
    this.#fresh.add(entry);
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
    const now = this.#now();
    let closed = 0;
    for (const entry of this.#fresh) {
      if (now - entry.since < this.limits.headersMs) break;
      this.#close(entry);
      closed++;
    }
    for (const entry of this.#used) {
      if (now - entry.lookedAt < this.#lookEvery) break;
      const idleSince = this.#look(entry, now);
      if (idleSince !== null && now - idleSince >= this.limits.keepAliveMs) {
        this.#close(entry);
        closed++;
      }
    }
    return closed;
  }

  /**
   * Closes one connection that has waited at least `minWaitMs` for a request: the oldest that
   * never sent one, else one seen idle that long (looking past at most 16 busy ones). At the cap,
   * or when the process is out of descriptors, a connection that sends nothing gives way to one
   * that may. True when one was closed.
   */
  evictOldest(minWaitMs: number): boolean {
    const now = this.#now();
    const fresh = first(this.#fresh);
    if (fresh && now - fresh.since >= minWaitMs) {
      this.#close(fresh);
      return true;
    }
    let looks = 0;
    for (const entry of this.#used) {
      if (looks++ === EVICT_LOOKS || entry.lookedAt === now) break;
      const idleSince = this.#look(entry, now);
      if (idleSince !== null && now - idleSince >= minWaitMs) {
        this.#close(entry);
        return true;
      }
    }
    return false;
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

  /**
   * An answer left body bytes due: the connection is closed `lingerMs` after Deno has taken the
   * answer, unless Deno closed it first (the client sent the rest; `connection: close` then ends
   * it). Forcefully, since a graceful close waits for the body. On HTTP/2, where an unread body
   * holds only its own stream, a request that came on the connection since (`seen`) clears
   * `bodyDue` and the connection is left to the other bounds.
   */
  #closeAfterAnswer(entry: Entry, opts: { info: Deno.ServeHandlerInfo; seen: number }): void {
    if (entry.requests !== opts.seen) return;
    entry.bodyDue = true;
    const arm = () => {
      if (entry.lingering !== null || !this.#all.has(entry)) return;
      entry.lingering = this.#after(this.limits.lingerMs ?? UNREAD_BODY_LINGER_MS, () => {
        entry.lingering = null;
        if (entry.bodyDue) entry.server?.abort();
      });
    };
    opts.info.completed.then(arm, arm);
  }

  #firstRequest(entry: Entry, info: Deno.ServeHandlerInfo): void {
    if (!this.#fresh.delete(entry)) return; // being closed
    entry.lookedAt = this.#now();
    this.#used.add(entry);
    if (this.#probeChecked) return;
    // Once per process, with the public signal: does `requestEnded` see a request end?
    this.#probeChecked = true;
    info.completed.then(() => {
      if (!requestEnded(info)) this.opts.onProbeBroken?.();
    }, () => {});
  }

  /**
   * Since when the connection is known to be idle, or null while a request is in flight. A
   * request that came and went since the last look ended at some moment before `now`: `now` is
   * taken, so the keep-alive bound is never cut short, only kept up to one look longer.
   */
  #look(entry: Entry, now: number): number | null {
    if (!requestEnded(entry.latest)) {
      entry.idleSince = null;
    } else {
      if (entry.requests !== entry.seen || entry.idleSince === null) entry.idleSince = now;
      entry.latest = null; // ended: its request need not stay in memory
    }
    entry.seen = entry.requests;
    entry.lookedAt = now;
    this.#used.delete(entry);
    this.#used.add(entry);
    return entry.idleSince;
  }

  #close(entry: Entry): void {
    if (entry.closing) return;
    entry.closing = true;
    this.#closing++;
    this.#fresh.delete(entry);
    this.#used.delete(entry);
    // Its linger closes it: a graceful close would wait for the body, and after one began
    // nothing could close the connection any more (serve_on_connection.ts `abort`).
    if (entry.bodyDue) return;
    // Graceful: closes a waiting connection at once, a busy one after its response.
    entry.server?.shutdown().catch(() => {});
  }

  #forget(entry: Entry): void {
    if (!this.#all.delete(entry)) return;
    entry.lingering?.();
    if (entry.closing) this.#closing--;
    this.#fresh.delete(entry);
    this.#used.delete(entry);
  }

  #now(): number {
    return (this.opts.now ?? workMs)();
  }

  #after(ms: number, fn: () => void): () => void {
    // Real time by default: sockets and their kernel buffers run at no clock's pace.
    return (this.opts.after ?? REAL_TIME.after)(ms, fn);
  }
}

/**
 * Whether Deno is done with a request: it closes its side of the request when the response has
 * been sent (or failed), and from then on `remoteAddr` throws. That is Deno 2.9's behaviour, not a
 * documented promise, so `ClientConnections` checks it once per process against the public
 * `completed` signal, and the gateway logs `gateway.keep_alive_bound_off` if it ever breaks.
 */
export function requestEnded(info: Deno.ServeHandlerInfo | null): boolean {
  if (!info) return true;
  try {
    void info.remoteAddr;
    return false;
  } catch {
    return true;
  }
}

class Entry {
  server: ConnectionServer | null = null;
  /** Requests received, and how many there were at the last look. */
  requests = 0;
  seen = 0;
  latest: Deno.ServeHandlerInfo | null = null;
  lookedAt = 0;
  idleSince: number | null = null;
  closing = false;
  /** The latest answer left body bytes due on the connection (`#closeAfterAnswer`). */
  bodyDue = false;
  /** Cancels the close after it, armed once Deno has taken the answer. */
  lingering: (() => void) | null = null;
  /** When it was accepted. */
  constructor(public since: number) {}
}

function first(set: Set<Entry>): Entry | undefined {
  for (const entry of set) return entry;
  return undefined;
}
