import type { Db } from "../../db/client.ts";
import {
  activeFences,
  type FenceBounds,
  fencesSince,
  liftFence,
  saveFence,
} from "../../db/fence_store.ts";
import type { AbortConfig } from "../config/schema.ts";
import type { IrRequest } from "../formats/ir.ts";
import { turnFingerprint } from "../formats/turn_fingerprint.ts";
import { type Clock, nowSpan } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { isRecord } from "../runtime/json.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Metrics } from "../runtime/metrics.ts";
import type { AbortScope } from "./abort_scope.ts";
import { type Fence, FenceSet, MAX_FENCES, MAX_FENCES_PER_KEY } from "./fence_set.ts";
import type { LiveRequest } from "./live_request.ts";
import { newRequestId } from "./request_id.ts";

export type { Fence };

/**
 * How often each instance reads the fences other instances made or lifted (configured ms, so
 * scaled like every wait): the window within which a lift, or a turn fence made elsewhere,
 * reaches it (docs/scaling.md "Fences"). A session fence reaches live peers at once, with the
 * forwarded abort.
 */
export const FENCE_RELOAD_MS = 2_000;

/**
 * How long a lifted or expired row stays in the database (configured ms): every instance reads
 * a lift many times over within it. One that has not read for half of it reads every active
 * fence anew instead of the changes.
 */
export const FENCE_RETAIN_MS = 60_000;

/**
 * How long an abort's answer waits for its fence to be stored, in real ms (a database round
 * trip does not shrink in a scaled test, as `PEER_ANSWER_MS`). The fence holds here already; a
 * slow write goes on and is tried again at the next reload if it fails.
 */
const SAVE_WAIT_MS = 1_000;

/** The fence as the abort endpoints answer it (docs/admin.md "Fences"). */
export interface FenceSummary {
  id: string;
  kind: Fence["kind"];
  /** ISO 8601. */
  expires_at: string;
}

export function fenceSummary(fence: Fence | null): FenceSummary | null {
  return fence && {
    id: fence.id,
    kind: fence.kind,
    expires_at: new Date(fence.expiresAt).toISOString(),
  };
}

/**
 * The fences an operator's abort leaves (docs/design.md "Abort and disconnect"): made in memory
 * before the abort stops anything (an agent re-sends within milliseconds), then stored in
 * libSQL so they hold across restarts and reach every instance, which reads the changes every
 * `FENCE_RELOAD_MS`. The admission path asks `refusal`, synchronously.
 */
export class Fences {
  readonly set: FenceSet;
  /** The database version this process has read up to; null before its first read. */
  #version: number | null = null;
  #lastRead = -Infinity;
  /** Fences made here and not yet stored: kept through a full read, stored again at the next. */
  #unsaved = new Map<string, Fence>();
  /** Ids of fences made or adopted while a full read runs; null when none runs. */
  #madeDuringRead: Set<string> | null = null;
  #reading: Promise<void> | null = null;

  constructor(
    private deps: {
      db: Db;
      clock: Clock;
      log: Logger;
      instanceId: string;
      /** The `abort` block of the config in force; the defaults while there is none. */
      settings: () => AbortConfig | undefined;
      metrics?: Metrics;
      bounds?: { perKey?: number; total?: number };
    },
  ) {
    this.set = new FenceSet(deps.bounds);
    if (deps.metrics) deps.metrics.fences = () => this.set.counts(deps.clock.now());
  }

  /**
   * How long each kind of fence lasts under the config in force, in configured seconds (0: off),
   * for the admin page's abort confirmation (docs/admin.md "Fences").
   */
  durations(): Record<Fence["kind"], number> {
    return { session: this.#secs("session"), turn: this.#secs("turn") };
  }

  #secs(kind: Fence["kind"]): number {
    const s = this.deps.settings();
    return kind === "session" ? s?.session_fence_secs ?? 600 : s?.turn_fence_secs ?? 120;
  }

  /**
   * Fences `sessionId` for the abort's scope: the admin token's refuses every key's requests
   * under that id, a key's only its own. Null when session fences are off.
   */
  fenceSession(sessionId: string, scope: AbortScope): Fence | null {
    return this.#make({
      kind: "session",
      keyId: scope.admin ? null : scope.keyId,
      sessionId,
      fingerprint: null,
      requestId: null,
    });
  }

  /**
   * Fences the retry of a running request's turn, for its own key and session. Null when turn
   * fences are off, or its body was not read yet (there is no turn to know again).
   */
  fenceTurn(live: LiveRequest): Fence | null {
    if (!live.conversation || this.#secs("turn") === 0) return null;
    return this.#make({
      kind: "turn",
      keyId: live.record.keyId,
      sessionId: live.record.sessionId,
      fingerprint: turnFingerprint(live.conversation),
      requestId: live.record.id,
    });
  }

  #make(init: Pick<Fence, "kind" | "keyId" | "sessionId" | "fingerprint" | "requestId">) {
    const secs = this.#secs(init.kind);
    if (secs === 0) return null;
    const now = this.deps.clock.now();
    const fence: Fence = {
      id: newRequestId(now),
      ...init,
      instanceId: this.deps.instanceId,
      createdAt: now,
      expiresAt: this.deps.clock.deadline(secs * 1000, now),
      liftedAt: null,
    };
    this.set.put(fence, now);
    this.#unsaved.set(fence.id, fence);
    this.#madeDuringRead?.add(fence.id);
    return fence;
  }

  /** A fence a peer made and sent with its forwarded abort (checked by the caller), held at once. */
  adopt(fence: Fence): void {
    this.set.put(fence, this.deps.clock.now());
    this.#madeDuringRead?.add(fence.id);
    // Kept through a full read until the database has it: stored by its maker, or by this
    // instance at its next read should the maker's write have failed.
    this.#unsaved.set(fence.id, fence);
  }

  /**
   * Stores a fence made here, waiting for the write at most `SAVE_WAIT_MS`: false when it is
   * not stored yet (it holds here, and the next reload tries again).
   */
  async save(fence: Fence): Promise<boolean> {
    let cancel = () => {};
    const late = new Promise<false>((resolve) => {
      cancel = this.deps.clock.after(SAVE_WAIT_MS, () => resolve(false));
    });
    try {
      return await Promise.race([this.#store(fence), late]);
    } finally {
      cancel();
    }
  }

  async #store(fence: Fence): Promise<boolean> {
    const now = this.deps.clock.now();
    try {
      await saveFence(this.deps.db, fence, { now, bounds: this.#bounds() });
      this.#unsaved.delete(fence.id);
      return true;
    } catch (err) {
      // Stored already (a retry after a write whose answer was lost): nothing more to do.
      if (String(err).includes("UNIQUE")) {
        this.#unsaved.delete(fence.id);
        return true;
      }
      this.deps.log.event("fence.save_failed", { fence: fence.id, error: String(err) });
      return false;
    }
  }

  #bounds(): FenceBounds {
    return {
      perKey: this.deps.bounds?.perKey ?? MAX_FENCES_PER_KEY,
      total: this.deps.bounds?.total ?? MAX_FENCES,
      retainMs: nowSpan(this.deps.clock, FENCE_RETAIN_MS),
    };
  }

  /**
   * The refusal of a request a fence stops, or null: its session first, then (only if its key
   * has any turn fence, so most requests never digest their conversation) its turn.
   */
  refusal(
    request: { keyId: string | null; sessionId: string | null; ir: IrRequest },
  ): GatewayError | null {
    const now = this.deps.clock.now();
    const { keyId, sessionId } = request;
    const session = sessionId === null ? null : this.set.sessionFence(sessionId, keyId, now);
    const fence = session ??
      (this.set.mayHaveTurnFence(keyId)
        ? this.set.turnFence({ keyId, sessionId, fingerprint: turnFingerprint(request.ir) }, now)
        : null);
    if (!fence) return null;
    this.deps.metrics?.fenceRefusals.inc({ kind: fence.kind });
    return fenceRefusal(fence);
  }

  /** The fences in force here. */
  list(): Fence[] {
    return this.set.active(this.deps.clock.now());
  }

  /**
   * Lifts a fence: in the database first (every instance reads it within `FENCE_RELOAD_MS`),
   * then here at once. False when no fence of that id is in force here or stored. A database
   * error is thrown, and nothing is lifted, unless the fence was never stored.
   */
  async lift(id: string): Promise<boolean> {
    const now = this.deps.clock.now();
    const unsaved = this.#unsaved.delete(id);
    let stored = false;
    try {
      stored = await liftFence(this.deps.db, id, { now });
    } catch (err) {
      if (!unsaved) throw err;
    }
    return this.set.lift(id) || stored;
  }

  /**
   * Reads what changed in the database since the last read (every active fence on the first
   * read, and after a gap long enough that lifted rows may be gone), and stores what was made
   * here while it could not be. One read at a time.
   */
  reload(): Promise<void> {
    return this.#reading ??= this.#read().finally(() => (this.#reading = null));
  }

  async #read(): Promise<void> {
    for (const fence of [...this.#unsaved.values()]) await this.#store(fence);
    const now = this.deps.clock.now();
    const stale = this.deps.clock.elapsed(this.#lastRead, now) > FENCE_RETAIN_MS / 2;
    if (this.#version === null || stale) {
      // Fences made or adopted while the read ran may be stored after its snapshot (and so be
      // neither in it nor unsaved any more): they are kept too.
      const made = new Set<string>();
      this.#madeDuringRead = made;
      const { fences, version } = await activeFences(this.deps.db, { now }).finally(() => {
        this.#madeDuringRead = null;
      });
      const kept = new Set([
        ...fences.map((f) => f.id),
        ...this.#unsaved.keys(),
        ...made,
      ]);
      for (const held of this.set.active(now)) if (!kept.has(held.id)) this.set.lift(held.id);
      for (const fence of fences) this.set.put(fence, now);
      this.#version = version;
    } else {
      for (let more = true; more;) {
        const read = await fencesSince(this.deps.db, this.#version);
        for (const fence of read.fences) this.set.put(fence, now);
        this.#version = read.version;
        more = read.more;
      }
    }
    this.#lastRead = now;
  }

  /** Reads every `FENCE_RELOAD_MS` while `ready`; answers the stop. */
  startReloading(opts: { ready: () => boolean }): () => void {
    const { clock, log } = this.deps;
    let stopped = false;
    let cancel = () => {};
    let failing = false;
    const tick = async () => {
      try {
        if (opts.ready()) await this.reload();
        if (failing) log.event("fence.reload_recovered", {});
        failing = false;
      } catch (err) {
        // Said once per outage, not every two seconds.
        if (!failing) log.event("fence.reload_failed", { error: String(err) });
        failing = true;
      } finally {
        this.set.sweep(clock.now());
        if (!stopped) cancel = clock.after(FENCE_RELOAD_MS, tick);
      }
    };
    cancel = clock.after(FENCE_RELOAD_MS, tick);
    return () => {
      stopped = true;
      cancel();
    };
  }
}

/**
 * The refusal a fenced request gets, before any upstream call: the operator stopped the session
 * or this turn, until when, and which fence (the history row names it too).
 */
export function fenceRefusal(fence: Fence): GatewayError {
  const until = new Date(fence.expiresAt).toISOString();
  const message = fence.kind === "session"
    ? `an operator stopped session '${fence.sessionId}' until ${until}; its requests are refused ` +
      `until then unless the fence is lifted (fence ${fence.id})`
    : `an operator stopped this turn until ${until}; it is refused if sent again, while a new ` +
      `turn of the conversation is answered (fence ${fence.id})`;
  return new GatewayError(message, {
    code: fence.kind === "session" ? "gw.session.fenced" : "gw.turn.fenced",
  });
}

/** A fence as a peer sent it (a signed call); null when it is not one. */
export function fenceFromJson(value: unknown): Fence | null {
  if (!isRecord(value)) return null;
  const str = (v: unknown) => typeof v === "string" && v !== "" && v.length <= 256;
  const strOrNull = (v: unknown) => v === null || str(v);
  const int = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v);
  const ok = str(value.id) && (value.kind === "session" || value.kind === "turn") &&
    strOrNull(value.keyId) && strOrNull(value.sessionId) && strOrNull(value.fingerprint) &&
    strOrNull(value.requestId) && str(value.instanceId) && int(value.createdAt) &&
    int(value.expiresAt) && value.liftedAt === null;
  if (!ok) return null;
  return {
    id: value.id as string,
    kind: value.kind as Fence["kind"],
    keyId: value.keyId as string | null,
    sessionId: value.sessionId as string | null,
    fingerprint: value.fingerprint as string | null,
    requestId: value.requestId as string | null,
    instanceId: value.instanceId as string,
    createdAt: value.createdAt as number,
    expiresAt: value.expiresAt as number,
    liftedAt: null,
  };
}
