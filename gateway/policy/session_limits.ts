import type { GatewayKey } from "../config/schema.ts";
import type { LoopBreaker, SessionBudget } from "../config/limits_schema.ts";
import type { Db } from "../../db/client.ts";
import { sessionTotals } from "../../db/session_queries.ts";
import { billableAmount, type Billing } from "../live/billing.ts";
import { affinitySession } from "../route/affinity.ts";
import { type Clock, REAL_TIME } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Logger } from "../runtime/logger.ts";

/** A session's use against its key's `session_budget`. */
export interface SessionUse {
  requests: number;
  tokens: number;
  costUsd: number;
}

/** Sessions (and loop-breaker histories) kept per process; the least recently used go first. */
const MAX_SESSIONS = 100_000;
/** Distinct bodies remembered per session for the loop breaker; the oldest go first. */
const MAX_BODIES = 64;
/**
 * Bodies the loop breaker remembers in all, over every key's sessions: about 300 bytes each,
 * so some 60 MB. Without it the two bounds above let 6.4 million of them (about 1.9 GB) be
 * remembered, one request each (docs/security.md "Sessions are per key"). Past it the least
 * recently used sessions' bodies go first.
 */
const MAX_REMEMBERED_BODIES = 200_000;
/** A database slower than this does not hold a request: the session starts from its local count. */
const READ_TIMEOUT_MS = 500;

interface Tracked {
  use: SessionUse;
  /** Set once history's count of the session is in `use` (or could not be read). */
  seeded: Promise<void> | null;
}

/**
 * Per-key session limits (docs/config.md "Session limits"): `session_budget` caps a session's
 * requests, billed tokens and USD; `loop_breaker` refuses the same body repeated in a session.
 * Both are checked once the body is read (the session may be named by it) and answered 429 in
 * the client's format, recorded like any refusal.
 *
 * Counts live in this process. A session's first request here reads what history already holds
 * of it (a restart or another instance before it), so a budget survives a restart; after that
 * the process counts on its own, as affinity keeps a session on one instance's view anyway
 * (docs/scaling.md "Per process").
 */
export class SessionLimits {
  #tracked = new Map<string, Tracked>();
  #bodies = new Map<string, Map<string, number[]>>();
  /** Digests in all of `#bodies`. */
  #remembered = 0;

  constructor(
    private deps: {
      db: Db | null;
      clock: Clock;
      log?: Logger;
      /** Sessions kept (MAX_SESSIONS), and bodies remembered in all (MAX_REMEMBERED_BODIES). */
      max?: number;
      maxBodies?: number;
    },
  ) {}

  /** Whether the key has a session limit, so its requests need a check (and maybe the body's digest). */
  static applies(key: GatewayKey | undefined): key is GatewayKey {
    return key?.session_budget !== undefined || key?.loop_breaker !== undefined;
  }

  /**
   * Admits a request of the key's session, or throws its 429. Counts it against the budget,
   * and its body's digest against the loop breaker, only when admitted.
   */
  async admit(
    key: GatewayKey,
    opts: { sessionId: string; bodyDigest?: () => Promise<string> },
  ): Promise<void> {
    const name = sessionKey(key.id, opts.sessionId);
    const budget = key.session_budget;
    const tracked = budget ? await this.#seeded(name, { keyId: key.id, ...opts }) : null;
    if (budget && tracked) {
      const over = overBudget(tracked.use, budget);
      if (over) {
        throw new GatewayError(
          `session '${opts.sessionId}' of key '${key.id}' has used its budget of ${over}`,
          { code: "gw.session.budget_exhausted" },
        );
      }
    }
    const breaker = key.loop_breaker;
    if (breaker && opts.bodyDigest) this.#checkLoop(name, await opts.bodyDigest(), breaker);
    if (tracked) tracked.use.requests++;
  }

  /** The request's billing, with each billed hop counted against its session's budget. */
  billing(base: Billing, opts: { keyId: string; sessionId: string }): Billing {
    const name = sessionKey(opts.keyId, opts.sessionId);
    return {
      bill: (hop) => {
        const priced = base.bill(hop);
        const use = this.#tracked.get(name)?.use;
        if (!use) return priced;
        use.tokens += billableAmount(hop.inputTokens) + billableAmount(hop.outputTokens);
        use.costUsd += billableAmount(priced.costUsd);
        return priced;
      },
    };
  }

  /** What this process counts of a key's session; undefined when it tracks none. */
  use(keyId: string | null, sessionId: string): SessionUse | undefined {
    if (keyId === null) return undefined;
    const use = this.#tracked.get(sessionKey(keyId, sessionId))?.use;
    return use && { ...use };
  }

  async #seeded(
    name: string,
    opts: { keyId: string; sessionId: string },
  ): Promise<Tracked> {
    let tracked = this.#tracked.get(name);
    if (tracked) {
      // Most recently used last: the map's order is the eviction order.
      this.#tracked.delete(name);
    } else {
      tracked = { use: { requests: 0, tokens: 0, costUsd: 0 }, seeded: null };
      tracked.seeded = this.#seed(tracked, opts);
    }
    this.#tracked.set(name, tracked);
    trim(this.#tracked, this.deps.max ?? MAX_SESSIONS);
    await tracked.seeded;
    return tracked;
  }

  /** Adds what history holds of the session, within READ_TIMEOUT_MS. */
  async #seed(tracked: Tracked, opts: { keyId: string; sessionId: string }): Promise<void> {
    const { db, log } = this.deps;
    if (!db) return;
    let timer: (() => void) | undefined;
    // A bound on a database read, the process's own work: real time, which a scaled or virtual
    // clock must not shorten (gateway/runtime/clock.ts REAL_TIME).
    const late = new Promise<null>((resolve) =>
      timer = REAL_TIME.after(READ_TIMEOUT_MS, () => resolve(null))
    );
    try {
      const totals = await Promise.race([sessionTotals(db, opts), late]);
      if (totals === null) {
        log?.event("session.usage_unread", { key: opts.keyId, reason: "timeout" });
        return;
      }
      // The history's sums: rows written before counts were checked may hold anything.
      tracked.use.requests += billableAmount(totals.requests);
      tracked.use.tokens += billableAmount(totals.tokens);
      tracked.use.costUsd += billableAmount(totals.costUsd);
    } catch (err) {
      log?.event("session.usage_unread", { key: opts.keyId, reason: String(err) });
    } finally {
      timer?.();
    }
  }

  /**
   * Refuses the `repeats`-th copy of one body within the window; only admitted copies count,
   * so a client retrying a refused copy is not held off longer for it.
   */
  #checkLoop(name: string, digest: string, breaker: LoopBreaker): void {
    const now = this.deps.clock.now();
    const { clock } = this.deps;
    const windowMs = breaker.window_secs * 1000;
    let bodies = this.#bodies.get(name);
    if (bodies) this.#bodies.delete(name);
    bodies ??= new Map();
    this.#bodies.set(name, bodies);
    const seen = (bodies.get(digest) ?? []).filter((at) => clock.elapsed(at, now) < windowMs);
    if (seen.length >= breaker.repeats - 1) {
      const freesIn = windowMs - clock.elapsed(seen[0]!, now);
      bodies.set(digest, seen);
      throw new GatewayError(
        `the same request was sent ${seen.length + 1} times in ${breaker.window_secs} s in this ` +
          "session: refused as a loop",
        {
          code: "gw.session.loop_detected",
          retryAfterSecs: Math.max(1, Math.ceil(freesIn / 1000)),
        },
      );
    }
    if (!bodies.delete(digest)) this.#remembered++;
    bodies.set(digest, [...seen, now]);
    this.#remembered -= trim(bodies, MAX_BODIES);
    this.#forgetOldBodies();
  }

  /** The least recently used sessions' bodies go while over either bound; this one's last. */
  #forgetOldBodies(): void {
    const sessions = this.deps.max ?? MAX_SESSIONS;
    const bodies = this.deps.maxBodies ?? MAX_REMEMBERED_BODIES;
    for (const [name, held] of this.#bodies) {
      if (this.#bodies.size <= sessions && this.#remembered <= bodies) return;
      this.#bodies.delete(name);
      this.#remembered -= held.size;
    }
  }
}

/** The first cap the use has reached, in words; null when under all. */
function overBudget(use: SessionUse, budget: SessionBudget): string | null {
  if (budget.requests !== undefined && use.requests >= budget.requests) {
    return `${budget.requests} requests`;
  }
  if (budget.tokens !== undefined && use.tokens >= budget.tokens) return `${budget.tokens} tokens`;
  if (budget.usd !== undefined && use.costUsd >= budget.usd) return `${budget.usd} USD`;
  return null;
}

/** A session belongs to its key (docs/security.md "Sessions are per key"). */
function sessionKey(keyId: string, sessionId: string): string {
  return affinitySession({ keyId, sessionId })!;
}

/** Drops the oldest entries past `max`; answers how many. */
function trim<K, V>(map: Map<K, V>, max: number): number {
  let dropped = 0;
  while (map.size > max) {
    const oldest = map.keys().next().value;
    if (oldest === undefined) break;
    map.delete(oldest);
    dropped++;
  }
  return dropped;
}

/** The loop breaker's name for a body: SHA-256 of its bytes, as sent. */
export async function bodyDigest(bytes: Uint8Array): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", ownBuffer(bytes)));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The bytes over a plain ArrayBuffer, as WebCrypto takes them: copied only if shared. */
function ownBuffer(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return isPlain(bytes) ? bytes : new Uint8Array(bytes);
}

function isPlain(bytes: Uint8Array): bytes is Uint8Array<ArrayBuffer> {
  return bytes.buffer instanceof ArrayBuffer;
}
