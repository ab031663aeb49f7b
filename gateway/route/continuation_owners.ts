import { createHash } from "node:crypto";
import type { Db } from "../../db/client.ts";
import {
  bindContinuationOwners,
  type ContinuationOwner,
  findContinuationOwner,
} from "../../db/continuation_owners_store.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { inTime } from "../runtime/in_time.ts";
import type { Logger } from "../runtime/logger.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The longest handle bound or looked up. Kept as a digest, so its length costs no storage; this
 * bounds the hashing. A longer one is bound to nobody, so under keys it is refused as unseen.
 */
export const MAX_CONTINUATION_CHARS = 65_536;
/** Bindings in this process's memory, every key's together, in front of the database. */
const MEMORY_BINDINGS = 50_000;
/** Per key, in the database: its most recently used bindings. */
const STORED_PER_KEY = 100_000;
/**
 * A binding its owner has neither received nor named for this long is dropped: OpenAI keeps a
 * stored response 30 days by default (docs/design.md "Continuation ids").
 */
const RETAIN_MS = 30 * DAY_MS;
/** An owner naming its handle refreshes the binding's age at most this often: one write a day. */
const REFRESH_MS = DAY_MS;
/** The database is pruned (per key, and by age) once every this many writes of this process. */
const PRUNE_EVERY = 100;
/** A lookup the database has not answered in this long fails with a clear error. */
const LOOKUP_MS = 5_000;

/**
 * Which gateway key each continuation id or token was handed to (docs/design.md "Continuation
 * ids"): the handles an upstream's answer hands back (a stored response's id and items, a
 * conversation, an Interactions continuation token) are bound to the key whose request it
 * answered, as they pass; a request naming one is checked against it
 * (continuation_check.ts). The first key a handle is bound to keeps it. Kept by SHA-256 (a
 * token resumes a decode: whoever reads it could), in this process's memory (bounded, most
 * recently used kept) and in the history database, so every instance sharing it agrees.
 * Writes never hold a request up; a database that is away leaves a binding in this process only.
 */
export class ContinuationOwners {
  #memory = new Map<string, ContinuationOwner>();
  #writes = 0;

  constructor(
    private opts: {
      db: Db | null;
      clock: Clock;
      log: Logger;
      memoryBindings?: number;
      storedPerKey?: number;
      retainMs?: number;
      pruneEvery?: number;
    },
  ) {}

  /**
   * Binds `handles` to `keyId`. One bound to another key stays that key's; one already this
   * key's is written again only to refresh its age (REFRESH_MS).
   */
  bind(keyId: string, handles: readonly string[]): void {
    const { db, clock, log } = this.opts;
    const now = clock.now();
    const digests: string[] = [];
    for (const handle of handles) {
      if (!usable(handle)) continue;
      const digest = digestOf(handle);
      const known = this.#known(digest, now);
      if (known && (known.keyId !== keyId || now - known.usedAt < REFRESH_MS)) continue;
      this.#remember(digest, { keyId, usedAt: now });
      digests.push(digest);
    }
    if (!digests.length || !db || db.client.protocol === "none") return;
    const prune = ++this.#writes % (this.opts.pruneEvery ?? PRUNE_EVERY) === 0;
    bindContinuationOwners(db, { keyId, usedAt: now, digests }, {
      prune: prune
        ? { perKey: this.opts.storedPerKey ?? STORED_PER_KEY, before: now - this.#retainMs }
        : undefined,
    }).catch((err) => {
      log.event("continuation_owner.unsaved", { key: keyId, error: String(err) });
    });
  }

  /**
   * The key `handle` was handed to, or undefined when no instance bound it (or its binding
   * aged out). Throws a 503 when the database could not say.
   */
  async ownerOf(handle: string): Promise<string | undefined> {
    if (!usable(handle)) return undefined;
    const { db, clock } = this.opts;
    const digest = digestOf(handle);
    const known = this.#known(digest, clock.now());
    if (known) return known.keyId;
    if (!db || db.client.protocol === "none") return undefined;
    let row: ContinuationOwner | null;
    try {
      row = await inTime(findContinuationOwner(db, digest), { clock, ms: LOOKUP_MS });
    } catch (err) {
      throw new GatewayError(
        "the gateway could not look up whose continuation this is: the history database did " +
          "not answer; try again",
        { code: "gw.gateway.continuation_lookup_failed", cause: err },
      );
    }
    if (!row || clock.now() - row.usedAt > this.#retainMs) return undefined;
    this.#remember(digest, row);
    return row.keyId;
  }

  get #retainMs(): number {
    return this.opts.retainMs ?? RETAIN_MS;
  }

  /** A binding in memory, unless it aged out (then forgotten). */
  #known(digest: string, now: number): ContinuationOwner | undefined {
    const known = this.#memory.get(digest);
    if (known && now - known.usedAt > this.#retainMs) {
      this.#memory.delete(digest);
      return undefined;
    }
    return known;
  }

  #remember(digest: string, owner: ContinuationOwner): void {
    this.#memory.delete(digest);
    this.#memory.set(digest, owner);
    if (this.#memory.size > (this.opts.memoryBindings ?? MEMORY_BINDINGS)) {
      const oldest = this.#memory.keys().next().value;
      if (oldest !== undefined) this.#memory.delete(oldest);
    }
  }
}

function usable(handle: string): boolean {
  return handle !== "" && handle.length <= MAX_CONTINUATION_CHARS;
}

/** What is kept of a handle: its SHA-256, URL-safe base64 (43 characters). */
export function digestOf(handle: string): string {
  return createHash("sha256").update(handle).digest("base64url");
}
