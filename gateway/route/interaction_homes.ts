import type { Db } from "../../db/client.ts";
import {
  deleteInteractionHome,
  findInteractionHome,
  saveInteractionHome,
} from "../../db/interaction_homes_store.ts";
import type { Clock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { inTime } from "../runtime/in_time.ts";
import type { Logger } from "../runtime/logger.ts";

/** Where a stored interaction lives: the upstream that holds it, and the route it was made on. */
export interface InteractionHome {
  upstream: string;
  route: string;
}

/**
 * The longest interaction id kept. Google's are a hundred characters or so; an upstream's
 * longer id is not recorded (a later turn on it is then told it is unknown), and a client's
 * longer one is looked up nowhere: neither can grow memory or the table.
 */
export const MAX_INTERACTION_ID_CHARS = 512;

/** Per key, in this process's memory: the newest ids, in front of the database. */
const MEMORY_PER_KEY = 10_000;
/** Per key, in the database: its newest ids. */
const STORED_PER_KEY = 100_000;
/** A key's rows are pruned to STORED_PER_KEY once every this many writes of this process. */
const PRUNE_EVERY = 100;
/** A lookup the database has not answered in this long fails with a clear error. */
const LOOKUP_MS = 5_000;

/**
 * Which upstream holds each interaction a key created (docs/interactions.md "Stored interactions"):
 * a request that continues one (`previous_interaction_id`) and a get, cancel or delete of one
 * must go to that upstream, and only there. Recorded per gateway key (another key's id is not
 * found: a key cannot read or continue another's conversation), in this process's memory
 * (bounded per key, newest kept) and in the history database, so every instance sharing it
 * finds what any of them recorded. Writes never hold a request up; a database that is away
 * leaves the record in this process only. A lookup that misses memory asks the database.
 */
export class InteractionHomes {
  #byKey = new Map<string, Map<string, InteractionHome>>();
  #writes = 0;

  constructor(
    private opts: {
      db: Db | null;
      clock: Clock;
      log: Logger;
      memoryPerKey?: number;
      storedPerKey?: number;
      pruneEvery?: number;
    },
  ) {}

  /** Records that `interactionId`, made under `keyId`, lives at `home`. */
  note(keyId: string | null, interactionId: string, home: InteractionHome): void {
    if (!usable(interactionId)) return;
    const key = keyId ?? "";
    this.#remember(key, interactionId, home);
    const { db, clock, log } = this.opts;
    if (!db || db.client.protocol === "none") return;
    const prune = ++this.#writes % (this.opts.pruneEvery ?? PRUNE_EVERY) === 0;
    const row = { keyId: key, interactionId, ...home, createdAt: clock.now() };
    saveInteractionHome(db, row, {
      pruneTo: prune ? this.opts.storedPerKey ?? STORED_PER_KEY : undefined,
    }).catch((err) => {
      log.event("interaction_home.unsaved", { upstream: home.upstream, error: String(err) });
    });
  }

  /**
   * Where `interactionId` lives for `keyId`, or undefined when no instance recorded it for this
   * key. Throws a 503 when the database could not say.
   */
  async find(keyId: string | null, interactionId: string): Promise<InteractionHome | undefined> {
    if (!usable(interactionId)) return undefined;
    const key = keyId ?? "";
    const known = this.#byKey.get(key)?.get(interactionId);
    if (known) return known;
    const { db, clock } = this.opts;
    if (!db || db.client.protocol === "none") return undefined;
    try {
      const row = await inTime(findInteractionHome(db, { keyId: key, interactionId }), {
        clock,
        ms: LOOKUP_MS,
      });
      if (row) this.#remember(key, interactionId, row);
      return row ?? undefined;
    } catch (err) {
      throw new GatewayError(
        "the gateway could not look up which upstream stores this interaction: the history " +
          "database did not answer; try again",
        { code: "gw.gateway.interaction_lookup_failed", cause: err },
      );
    }
  }

  /** Forgets an interaction its upstream deleted. */
  forget(keyId: string | null, interactionId: string): void {
    if (!usable(interactionId)) return;
    const key = keyId ?? "";
    this.#byKey.get(key)?.delete(interactionId);
    const { db, log } = this.opts;
    if (!db || db.client.protocol === "none") return;
    deleteInteractionHome(db, { keyId: key, interactionId }).catch((err) => {
      log.event("interaction_home.undeleted", { error: String(err) });
    });
  }

  #remember(key: string, interactionId: string, home: InteractionHome): void {
    let homes = this.#byKey.get(key);
    if (!homes) this.#byKey.set(key, homes = new Map());
    homes.delete(interactionId);
    homes.set(interactionId, home);
    if (homes.size > (this.opts.memoryPerKey ?? MEMORY_PER_KEY)) {
      const oldest = homes.keys().next().value;
      if (oldest !== undefined) homes.delete(oldest);
    }
  }
}

function usable(interactionId: string): boolean {
  return interactionId !== "" && interactionId.length <= MAX_INTERACTION_ID_CHARS;
}
