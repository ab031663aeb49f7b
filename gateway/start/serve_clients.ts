import { REAL_TIME, repeatEvery } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import type { ConnectionLimits } from "./settings.ts";
import { acceptLoop } from "./accept_loop.ts";
import { BurstLog } from "./burst_log.ts";
import { ClientConnections } from "./client_connections.ts";
import { refuseConnection } from "./refuse_connection.ts";
import { type ConnectionHandler, serveOnConnection } from "./serve_on_connection.ts";

/** At the cap, a connection that has waited this long for a request gives way to a newcomer. */
const EVICT_AFTER_MS = 1_000;
/** Out of descriptors: how many waiting connections one failed accept may close. */
const EVICT_PER_STARVED_ACCEPT = 8;
/** How long a refused connection may take to send its request line and read the 503. */
const REFUSE_WITHIN_MS = 2_000;
/** Refusals under way at once; beyond, a connection over the cap is closed without an answer. */
const MAX_REFUSING = 64;
/** A burst of accept failures or refusals logs at most one line this often... */
const BURST_LOG_EVERY_MS = 10_000;
/** ...and is over when none has come for this long. */
const BURST_QUIET_MS = 2_000;

export interface ClientServer {
  port: number;
  /** Null when the connection limits are on; otherwise why they are off. */
  unguarded: string | null;
  /** Settles (with the error) if the server stopped accepting for good: plain `Deno.serve` only. */
  lost: Promise<unknown>;
  /** Open client connections (`PULSEGATE_MAX_CONNECTIONS` caps them); null when not counted. */
  connections(): number | null;
  /** Stops accepting; waiting connections close at once, busy ones after their response. */
  shutdown(): Promise<void>;
}

export interface ServeClientsOptions {
  hostname: string;
  port: number;
  limits: ConnectionLimits;
  log: Logger;
  env: (name: string) => string | undefined;
}

/**
 * The gateway's HTTP server (docs/deploy.md "Connection limits"): its own accept loop over
 * `Deno.listen`, each connection served by Deno's native per-connection server, with a headers
 * bound, a keep-alive bound and a cap on open connections. Where the platform owns the listening
 * socket (Deno Deploy, `DENO_SERVE_ADDRESS`) or this Deno lacks the per-connection server, it is
 * plain `Deno.serve`, and `unguarded` says why.
 *
 * The bounds are real milliseconds, not scaled by `PULSEGATE_TIME_SCALE`: they bound real
 * sockets: a suite run at a hundredth of the time would otherwise give its own requests a 100 ms
 * headers bound. Tests that need them short set them short.
 */
export function serveClients(handler: ConnectionHandler, opts: ServeClientsOptions): ClientServer {
  const platform = ["DENO_DEPLOYMENT_ID", "DENO_SERVE_ADDRESS"].find((name) => opts.env(name));
  if (platform) {
    return plainServe(handler, {
      ...opts,
      unguarded: `the platform serves the connections (${platform})`,
    });
  }
  const serveOn = serveOnConnection();
  if (!serveOn) {
    return plainServe(handler, {
      ...opts,
      unguarded: "this Deno has no per-connection server (Deno.serve only)",
    });
  }
  const { log, limits } = opts;
  const clients = new ClientConnections({
    max: limits.max,
    headersMs: limits.headersTimeoutMs,
    keepAliveMs: limits.keepAliveTimeoutMs,
  }, {
    onProbeBroken: () =>
      log.event("gateway.keep_alive_bound_off", {
        reason: "this Deno does not show when a request has ended (client_connections.ts " +
          "requestEnded): idle connections are closed only at shutdown or to make room",
      }),
  });
  const listener = Deno.listen({ hostname: opts.hostname, port: opts.port });
  const stop = new AbortController();
  const refusing = new Set<Deno.Conn>();
  let answers = { evicted: 0, refused: 0, closed: 0 };
  let starvedEvictions = 0;
  const acceptFailures = new BurstLog(log, {
    event: "gateway.accept_failed",
    endEvent: "gateway.accept_recovered",
    everyMs: BURST_LOG_EVERY_MS,
    quietMs: BURST_QUIET_MS,
    endFields: () => {
      const fields = { open: clients.open, evicted: starvedEvictions };
      starvedEvictions = 0;
      return fields;
    },
  });
  const atCap = new BurstLog(log, {
    event: "gateway.connection_cap_reached",
    endEvent: "gateway.connection_cap_cleared",
    everyMs: BURST_LOG_EVERY_MS,
    quietMs: BURST_QUIET_MS,
    endFields: () => {
      const fields = { max: limits.max, open: clients.open, ...answers };
      answers = { evicted: 0, refused: 0, closed: 0 };
      return fields;
    },
  });

  const onError = (error: unknown) => {
    log.event("gateway.handler_failed", { error: String(error) });
    return new Response("Internal Server Error", { status: 500 });
  };
  const serve = (conn: Deno.Conn) => {
    try {
      void clients.track(handler, (counted) => serveOn(conn, { handler: counted, onError }));
    } catch {
      closeQuietly(conn); // gone before Deno could take it
    }
  };
  const refuse = (conn: Deno.Conn) => {
    if (refusing.size >= MAX_REFUSING) {
      answers.closed++;
      closeQuietly(conn);
      return;
    }
    answers.refused++;
    refusing.add(conn);
    void refuseConnection(conn, { withinMs: REFUSE_WITHIN_MS })
      .finally(() => refusing.delete(conn));
  };
  const onConnection = (conn: Deno.Conn) => {
    if (clients.hasRoom()) return serve(conn);
    atCap.hit({ max: limits.max, open: clients.open });
    if (clients.evictOldest(EVICT_AFTER_MS)) {
      answers.evicted++;
      return serve(conn);
    }
    refuse(conn);
  };

  const sweepEvery = Math.min(
    1_000,
    Math.max(10, Math.min(limits.headersTimeoutMs, limits.keepAliveTimeoutMs) / 10),
  );
  // Real time: a connection's header and keep-alive bounds are the socket's, not a clock's.
  const stopSweeping = repeatEvery(sweepEvery, {
    clock: REAL_TIME,
    run: () => clients.sweep(),
    unref: true,
  });
  const accepting: Promise<void> = acceptLoop(listener, {
    signal: stop.signal,
    onConnection,
    onFailure(err, { starved }) {
      let evicted = 0;
      while (starved && evicted < EVICT_PER_STARVED_ACCEPT && clients.evictOldest(EVICT_AFTER_MS)) {
        evicted++;
      }
      starvedEvictions += evicted;
      acceptFailures.hit({
        error: err instanceof Error ? err.message : String(err),
        code: (err as { code?: unknown }).code,
        open: clients.open,
      });
      return evicted > 0;
    },
  }).catch((err) => log.event("gateway.accept_loop_failed", { error: String(err) }));
  let stopping: Promise<void> | null = null;
  return {
    port: (listener.addr as Deno.NetAddr).port,
    unguarded: null,
    lost: new Promise(() => {}),
    connections: () => clients.open,
    shutdown: () =>
      stopping ??= (async () => {
        stop.abort();
        closeQuietly(listener);
        stopSweeping();
        acceptFailures.close();
        atCap.close();
        for (const conn of refusing) closeQuietly(conn);
        await accepting;
        await clients.closeAll();
      })(),
  };
}

/** Today's `Deno.serve`, its `finished` caught so an accept error is reported, not fatal. */
function plainServe(
  handler: ConnectionHandler,
  opts: ServeClientsOptions & { unguarded: string },
): ClientServer {
  const server = Deno.serve({ hostname: opts.hostname, port: opts.port, onListen() {} }, handler);
  return {
    port: server.addr.port,
    unguarded: opts.unguarded,
    // Resolves only on an accept error: after one, Deno.serve's loop has ended for good.
    lost: server.finished.then(() => new Promise(() => {}), (err) => err),
    connections: () => null,
    shutdown: () => server.shutdown(),
  };
}

function closeQuietly(closable: { close(): void }): void {
  try {
    closable.close();
  } catch {
    // Already closed.
  }
}
