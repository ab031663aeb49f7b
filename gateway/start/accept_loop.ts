import { REAL_TIME } from "../runtime/clock.ts";

/** A connection that came and went before it was accepted: try the next one at once, unlogged. */
const GONE_BEFORE_ACCEPT = new Set(["ECONNABORTED", "ECONNRESET", "EPROTO"]);
/** The process (or the system) lacks what a connection needs: waiting connections give way. */
const OUT_OF_RESOURCES = new Set(["EMFILE", "ENFILE", "ENOBUFS", "ENOMEM"]);
const FIRST_BACKOFF_MS = 5;
const MAX_BACKOFF_MS = 1_000;

export interface AcceptLoopOptions {
  onConnection(conn: Deno.Conn): void;
  /**
   * An accept failed; `starved` when for lack of descriptors or memory. Answers whether it freed
   * something (closed connections): the next try then comes after the shortest wait.
   */
  onFailure(err: unknown, opts: { starved: boolean }): boolean;
  /** Aborted at shutdown: the loop ends (the listener is closed too). */
  signal: AbortSignal;
}

/**
 * Accepts until shutdown (docs/deploy.md "Connection limits"). `Deno.serve` ends its accept loop
 * on the first error, and its `finished` promise then rejects with nobody to catch it, which
 * kills the process; here no error ends the loop. A failure is reported and the next try waits
 * 5 ms, doubling to 1 s while failures go on (5 ms again when the failure freed descriptors), so a
 * process out of descriptors neither spins nor stops listening, and accepts again as soon as
 * descriptors are free.
 */
export async function acceptLoop(listener: Deno.Listener, opts: AcceptLoopOptions): Promise<void> {
  let backoff = 0;
  while (!opts.signal.aborted) {
    let conn: Deno.Conn;
    try {
      conn = await listener.accept();
    } catch (err) {
      if (opts.signal.aborted) return;
      const code = (err as { code?: unknown }).code;
      if (typeof code === "string" && GONE_BEFORE_ACCEPT.has(code)) continue;
      const freed = opts.onFailure(err, {
        starved: typeof code === "string" && OUT_OF_RESOURCES.has(code),
      });
      backoff = freed
        ? FIRST_BACKOFF_MS
        : Math.min(MAX_BACKOFF_MS, Math.max(FIRST_BACKOFF_MS, backoff * 2));
      await pause(backoff, opts.signal);
      continue;
    }
    backoff = 0;
    try {
      opts.onConnection(conn);
    } catch (err) {
      // A fault in handling one connection ends that connection, never the loop.
      try {
        conn.close();
      } catch { /* already closed */ }
      opts.onFailure(err, { starved: false });
    }
  }
}

/** A real pause (the kernel's accept queue does not run on a scaled clock); a stop ends it. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return REAL_TIME.sleep(ms, signal).catch(() => {});
}
