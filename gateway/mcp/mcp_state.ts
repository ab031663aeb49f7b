import type { Config } from "../config/schema.ts";
import type { McpServer } from "../config/mcp_schema.ts";
import { Cooldowns } from "../route/cooldown.ts";
import type { Clock } from "../runtime/clock.ts";
import type { Logger } from "../runtime/logger.ts";
import { McpSession, McpSessions, type ServerSession } from "./mcp_sessions.ts";
import { endSession, type ServerTarget } from "./server_wire.ts";
import { serverLiveness } from "./server_targets.ts";
import { openServerSession, type ServerCallDeps } from "./server_requests.ts";
import { sessionEnded } from "./mcp_stops.ts";

/** What a tool's annotations let the gateway do when its call is lost after it was sent. */
export interface ToolHints {
  /** readOnlyHint or idempotentHint: running it twice does no harm, so it may fail over. */
  repeatable: boolean;
}

/**
 * What /mcp keeps in one process (docs/mcp.md): the sessions, each server's cooldowns (the
 * same pause doubling and half-open probe as upstreams: gateway/route/cooldown.ts, per replica,
 * in memory), the calls each replica has in progress, and the hints each server's tool list
 * gave.
 */
export class McpState {
  readonly sessions: McpSessions;
  #cooldowns = new Map<string, Cooldowns>();
  #inFlight = new Map<string, number>();
  #hints = new Map<string, Map<string, ToolHints>>();

  constructor(
    private deps: {
      clock: Clock;
      fetch: typeof fetch;
      log: Logger;
      config: () => Config | null;
    },
  ) {
    this.sessions = new McpSessions(deps.clock, {
      bounds: () => deps.config()?.mcp_sessions ?? { max: 0, max_age_secs: 60, idle_secs: 10 },
      onEnd: (session) => this.#ended(session),
    });
  }

  /** The cooldowns of one server's replicas, keyed by replica label. */
  cooldowns(server: McpServer): Cooldowns {
    let cooldowns = this.#cooldowns.get(server.id);
    if (!cooldowns) {
      cooldowns = new Cooldowns(this.deps.clock, {
        policy: () => {
          const config = this.deps.config();
          const now = config?.mcp_servers.find((s) => s.id === server.id) ?? server;
          return config
            ? serverLiveness(now, config).cooldown
            : { failuresToPause: 3, pauseSecs: 60, maxPauseSecs: 600 };
        },
        save: () => {},
      });
      this.#cooldowns.set(server.id, cooldowns);
    }
    return cooldowns;
  }

  /** Every replica charged so far and its phase, for `pulsegate_mcp_replica_state`. */
  replicaStates(): { replica: string; state: string }[] {
    return [...this.#cooldowns.values()].flatMap((c) =>
      c.all().map((s) => ({ replica: s.upstream, state: c.phase(s.upstream) }))
    );
  }

  inFlight(label: string): number {
    return this.#inFlight.get(label) ?? 0;
  }

  /** Takes a place on a replica; answers its release. */
  take(label: string): () => void {
    this.#inFlight.set(label, this.inFlight(label) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.inFlight(label) - 1;
      if (left <= 0) this.#inFlight.delete(label);
      else this.#inFlight.set(label, left);
    };
  }

  hints(serverId: string, tool: string): ToolHints | undefined {
    return this.#hints.get(serverId)?.get(tool);
  }

  /** The hints of a server's tools, from its latest list (bounded by the list's own bound). */
  setHints(serverId: string, hints: Map<string, ToolHints>): void {
    this.#hints.set(serverId, hints);
  }

  /**
   * The session's server session on this replica, opened at first use. A failed open is
   * forgotten so the next call tries again; so is one the server no longer knows (`forget`).
   */
  serverSession(
    session: McpSession,
    opts: { target: ServerTarget; deps: ServerCallDeps },
  ): Promise<ServerSession> {
    const { target } = opts;
    let opened = session.servers.get(target.label);
    if (!opened) {
      // On the session's own signal: a call that stops while this opens does not fail the
      // others waiting on it; the open keeps its own time bound.
      opened = openServerSession(target, {
        protocolVersion: session.protocolVersion,
        deps: { ...opts.deps, signal: session.signal },
      });
      session.servers.set(target.label, opened);
      opened.catch(() => {
        if (session.servers.get(target.label) === opened) session.servers.delete(target.label);
      });
    }
    return opened;
  }

  /** Ends every session (shutdown). */
  close(): void {
    for (const session of this.sessions.all()) this.sessions.end(session);
  }

  forget(session: McpSession, label: string): void {
    session.servers.delete(label);
  }

  /**
   * A session ended: its calls are stopped, then, once they ended and their cancellations went
   * out (so a server reads each before the DELETE), its server sessions are ended (DELETE).
   */
  #ended(session: McpSession): void {
    session.stop();
    for (const live of session.calls.values()) {
      if (!live.signal.aborted) live.abort(sessionEnded());
    }
    void session.quiet().then(() => {
      for (const [label, opened] of session.servers) {
        const target = this.targets.get(label);
        opened.then((s) => {
          if (!target || s.sessionId === null) return;
          const stop = new AbortController();
          const disarm = this.deps.clock.after(10_000, () => stop.abort());
          endSession(target, {
            sessionId: s.sessionId,
            fetch: this.deps.fetch,
            signal: stop.signal,
          })
            .finally(disarm);
        }, () => {});
      }
    });
    this.deps.log.event("mcp.session_ended", { session: session.id });
  }

  /** The targets the endpoint last used, by label (auth read from the env at that use). */
  readonly targets = new Map<string, ServerTarget>();
}
