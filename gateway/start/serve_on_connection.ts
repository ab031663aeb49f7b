/**
 * Deno's HTTP server for one accepted connection: the same native HTTP/1.1 and HTTP/2 code
 * `Deno.serve` runs for each connection it accepts itself, reached through `Deno[Deno.internal]`
 * because Deno has no public API for it. `Deno.serve` owns its accept loop and offers no header
 * timeout, no idle timeout, no connection cap, and ends its loop for good on the first accept
 * error (docs/deploy.md "Connection limits"); serving each connection we accepted ourselves gives
 * the gateway all four without a byte of the request passing through JavaScript.
 *
 * Internal, so checked at start: when a Deno lacks it, `serveOnConnection()` answers null and the
 * gateway falls back to plain `Deno.serve` and says so in its log.
 */

/** What Deno returns for one served connection (the shape `Deno.serve` returns). */
export interface ConnectionServer {
  /** Settles when the connection is closed; rejects on an I/O error on it. */
  finished: Promise<void>;
  /**
   * Graceful: a connection waiting for a request (no bytes, part of the headers, or idle between
   * requests) is closed at once; one with a response in progress is closed after that response.
   */
  shutdown(): Promise<void>;
}

export type ConnectionHandler = (
  request: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
) => Response | Promise<Response>;

export type ServeOnConnection = (
  conn: Deno.Conn,
  opts: { handler: ConnectionHandler; onError: (error: unknown) => Response | Promise<Response> },
) => ConnectionServer;

type InternalServeOnConnection = (
  connection: Deno.Conn,
  signal: AbortSignal | undefined,
  handler: ConnectionHandler,
  onError: (error: unknown) => Response | Promise<Response>,
  onListen: () => void,
) => ConnectionServer;

/** Deno's per-connection server, or null when this Deno does not have it. */
export function serveOnConnection(): ServeOnConnection | null {
  // Reading `Deno.serve` loads the HTTP module, which is what installs the internal function.
  if (typeof Deno.serve !== "function") return null;
  const internals = (Deno as unknown as Record<symbol, unknown>)[
    (Deno as unknown as { internal: symbol }).internal
  ] as { serveHttpOnConnection?: unknown } | undefined;
  const serve = internals?.serveHttpOnConnection;
  if (typeof serve !== "function" || serve.length !== 5) return null;
  const internal = serve as InternalServeOnConnection;
  return (conn, { handler, onError }) => internal(conn, undefined, handler, onError, noop);
}

function noop(): void {}
