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
  /**
   * Forceful: the connection is closed now, whatever it is doing. For a connection whose request
   * was answered before its body was read, which `shutdown()` would leave open until the client
   * sends the rest (`client_connections.ts`, docs/deploy.md "Answers before the body"). Does
   * nothing once `shutdown()` was called or the connection has ended: Deno's handle on it is gone.
   */
  abort(): void;
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
) => Omit<ConnectionServer, "abort">;

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
  return (conn, { handler, onError }) => {
    // Deno cancels the connection outright when this signal aborts (`op_http_cancel`, not
    // graceful): the one way to close it while its request body is still due.
    const stop = new AbortController();
    const server = internal(conn, stop.signal, handler, onError, noop);
    // Whether Deno still holds the connection's handle: a graceful shutdown takes it, and so
    // does the connection's end.
    let held = true;
    const gone = () => (held = false);
    server.finished.then(gone, gone);
    return {
      finished: server.finished,
      shutdown: () => {
        held = false;
        return server.shutdown();
      },
      abort: () => {
        if (!held) return;
        held = false;
        cancel(stop);
      },
    };
  };
}

/**
 * Aborts Deno's signal. Its listener cancels the connection by its handle, and throws if the
 * handle went in the moment between the connection's end and `finished` settling; a throw in an
 * event listener is reported as an uncaught error, which would end the process. That one error
 * is taken here: the connection it names is closed already.
 */
function cancel(stop: AbortController): void {
  const closedAlready = (event: ErrorEvent) => {
    if (event.error instanceof Deno.errors.BadResource) event.preventDefault();
  };
  globalThis.addEventListener("error", closedAlready);
  try {
    stop.abort();
  } finally {
    globalThis.removeEventListener("error", closedAlready);
  }
}

function noop(): void {}
