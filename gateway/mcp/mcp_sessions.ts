import type { McpSessions as SessionBounds } from "../config/mcp_schema.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { LiveRequest } from "../live/live_request.ts";

/** One server session a gateway session opened on one replica (spec "Session Management"). */
export interface ServerSession {
  /** The server's `Mcp-Session-Id`; null for a server that keeps no sessions. */
  sessionId: string | null;
  protocolVersion: string;
}

/**
 * A client's MCP session with the gateway (`Mcp-Session-Id`), bound to the key that opened it:
 * presented with another key it is unknown. Each replica it used has a server session of its
 * own, opened at first use, so no two callers ever share a server's per-session state.
 */
export class McpSession {
  readonly servers = new Map<string, Promise<ServerSession>>();
  /** Its tool calls in progress by the client's JSON-RPC id, for `notifications/cancelled`. */
  readonly calls = new Map<string, LiveRequest>();
  /** Cancels its idle and age timers. */
  disarm: () => void = () => {};
  #controller = new AbortController();

  /** Aborted when the session ends: what it opened on its own (server sessions) stops. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  stop(): void {
    this.#controller.abort(new Error("the MCP session ended"));
  }

  #waiters: (() => void)[] = [];
  #tracked = new Set<Promise<unknown>>();

  /** A message to a server the session's end must wait for (a cancellation before a DELETE). */
  track(work: Promise<unknown>): void {
    this.#tracked.add(work);
    work.finally(() => this.#tracked.delete(work));
  }

  /** A call of the session ended. */
  callEnded(rpcId: string, live: LiveRequest): void {
    if (this.calls.get(rpcId) === live) this.calls.delete(rpcId);
    if (this.calls.size) return;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** Settles once no call runs and every tracked message went out. */
  async quiet(): Promise<void> {
    if (this.calls.size) await new Promise<void>((resolve) => this.#waiters.push(resolve));
    await Promise.allSettled([...this.#tracked]);
  }

  constructor(
    readonly id: string,
    readonly opts: { keyId: string | null; protocolVersion: string },
  ) {}

  get keyId(): string | null {
    return this.opts.keyId;
  }

  get protocolVersion(): string {
    return this.opts.protocolVersion;
  }
}

/**
 * The gateway's MCP sessions, bounded in number and age (`mcp_sessions`, docs/mcp.md
 * "Sessions"): a session ends at its age or idle limit (timers of the injected clock), or its
 * client's DELETE; `onEnd` then stops its calls and ends its server sessions. When full, a new
 * initialize is refused rather than an older session pushed out, so a flood of initializes
 * cannot end callers' sessions.
 */
export class McpSessions {
  #byId = new Map<string, McpSession>();

  constructor(
    private clock: Clock,
    private opts: { bounds: () => SessionBounds; onEnd: (session: McpSession) => void },
  ) {}

  get size(): number {
    return this.#byId.size;
  }

  open(opts: { keyId: string | null; protocolVersion: string }): McpSession | GatewayError {
    const bounds = this.opts.bounds();
    if (this.#byId.size >= bounds.max) {
      return new GatewayError(
        `the gateway holds ${this.#byId.size} MCP sessions, its bound (mcp_sessions.max); ` +
          "end one with DELETE /mcp or retry later",
        { code: "gw.mcp.sessions_full", retryAfterSecs: 60 },
      );
    }
    const session = new McpSession(crypto.randomUUID(), opts);
    this.#byId.set(session.id, session);
    const aged = this.clock.after(bounds.max_age_secs * 1000, () => this.end(session));
    let idle = () => {};
    const armIdle = () => {
      idle();
      idle = this.clock.after(bounds.idle_secs * 1000, () => {
        // A call in progress keeps its session: the idle bound starts again when it ends.
        if (session.calls.size) armIdle();
        else this.end(session);
      });
    };
    armIdle();
    this.#touch.set(session, armIdle);
    session.disarm = () => {
      aged();
      idle();
    };
    return session;
  }

  #touch = new WeakMap<McpSession, () => void>();

  /** The live session of this id and key, touched; undefined when unknown, ended or another key's. */
  get(id: string, keyId: string | null): McpSession | undefined {
    const session = this.#byId.get(id);
    if (!session || session.keyId !== keyId) return undefined;
    this.#touch.get(session)?.();
    return session;
  }

  end(session: McpSession): void {
    if (this.#byId.get(session.id) !== session) return;
    this.#byId.delete(session.id);
    session.disarm();
    this.opts.onEnd(session);
  }

  all(): McpSession[] {
    return [...this.#byId.values()];
  }
}
