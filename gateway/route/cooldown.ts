import type { Clock } from "../runtime/clock.ts";

/**
 * One level of cooldown (docs/design.md "Cooldown"): an upstream as a whole (`model` null), or one
 * member of it, the upstream with one model (a pool member, or a plain candidate).
 */
export interface CooldownState {
  upstream: string;
  model: string | null;
  consecutiveFailures: number;
  pauseCount: number;
  pausedUntil: number | null; // epoch ms, real time
  /** Why it was last paused, for the operator (e.g. "3 failures in a row; last: gw.upstream.error"). */
  reason: string | null;
  /**
   * Epoch ms, real time: until then one request probes the upstream whose pause ended
   * (half-open, docs/design.md "Cooldown"); null when no probe is out.
   */
  probeUntil: number | null;
  updatedAt: number;
}

const RESET = {
  consecutiveFailures: 0,
  pauseCount: 0,
  pausedUntil: null,
  reason: null,
  probeUntil: null,
};

export interface CooldownPolicy {
  failuresToPause: number;
  pauseSecs: number;
  maxPauseSecs: number;
}

/** ok; paused; probing: the pause is over and one request at a time tests it (half-open). */
export type CooldownPhase = "ok" | "paused" | "probing";

/** A probe this process holds: the lease it claimed, to give back if the probe says nothing. */
export interface ProbeTicket {
  upstream: string;
  model: string | null;
  until: number;
}

/**
 * The key of one level's state: the upstream's id for the upstream as a whole, `upstream/model`
 * for a member. An upstream id never holds a "/" (gateway/config/schema.ts), so no member's key
 * is an upstream's, and the first "/" splits a key back (a model name may hold more).
 */
export function cooldownKey(upstream: string, model: string | null = null): string {
  return model === null ? upstream : `${upstream}/${model}`;
}

function levelOf(key: string): Pick<CooldownState, "upstream" | "model"> {
  const slash = key.indexOf("/");
  return slash < 0
    ? { upstream: key, model: null }
    : { upstream: key.slice(0, slash), model: key.slice(slash + 1) };
}

/** What `claimProbe` answers: a probe to send, the upstream is simply open, or someone probes it. */
export type ProbeAnswer = ProbeTicket | "open" | "taken";

/**
 * The shared store's side of a probe (db/cooldown_store.ts): `claim` takes the probe in one
 * conditional write and answers "claimed", or the stored state that refused it, or null when
 * the store cannot be asked (then this process's own claim stands); `release` gives back a
 * probe that ended with no word on the upstream's health.
 */
export interface ProbeStore {
  claim(probe: ProbeTicket & { now: number }): Promise<"claimed" | CooldownState | null>;
  release(probe: ProbeTicket): void;
}

/**
 * docs/design.md "Cooldown": consecutive failures pause a level (an upstream, or a member: see
 * `cooldownKey`), each further pause doubles up to the cap, one success resets it. When a pause
 * ends the level is half-open: one request probes it (`claimProbe`), the others are sent
 * elsewhere; success closes it, failure pauses it again for the doubled pause. Every method
 * takes one level's key; which levels a candidate's hop charges is cooldown_levels.ts's. State
 * is handed to `save` on every change so it survives a restart and reaches other instances.
 */
export class Cooldowns {
  #states = new Map<string, CooldownState>();

  constructor(
    private clock: Clock,
    private opts: {
      policy: () => CooldownPolicy;
      save: (s: CooldownState) => void;
      probes?: ProbeStore;
    },
  ) {}

  load(states: CooldownState[]): void {
    for (const s of states) this.#states.set(cooldownKey(s.upstream, s.model), { ...s });
  }

  get(key: string): CooldownState {
    return this.#states.get(key) ?? { ...RESET, ...levelOf(key), updatedAt: 0 };
  }

  /**
   * Paused, or half-open with its probe out: not to be sent new requests while others can. The
   * reads below run for every candidate of every request at both levels: a level with no state
   * (the usual one) is read as RESET without building one.
   */
  isPaused(key: string): boolean {
    const s = this.#states.get(key);
    if (s === undefined) return false;
    const now = this.clock.now();
    return (s.pausedUntil !== null && s.pausedUntil > now) ||
      (s.probeUntil !== null && s.probeUntil > now);
  }

  /** Its pause is over, not yet confirmed by a success, and no probe is out: the next request probes it. */
  halfOpen(key: string): boolean {
    const s = this.#states.get(key);
    if (s === undefined || s.pausedUntil === null) return false;
    const now = this.clock.now();
    return s.pausedUntil <= now && (s.probeUntil === null || s.probeUntil <= now);
  }

  phase(key: string): CooldownPhase {
    const pausedUntil = this.#states.get(key)?.pausedUntil ?? null;
    if (pausedUntil === null) return "ok";
    return pausedUntil > this.clock.now() ? "paused" : "probing";
  }

  /**
   * A request would send to the level `key`. Half-open: the first to ask gets the probe (held
   * for `leaseMs` at most, should its process die with it), claimed here at once and then in the
   * shared store, which one instance wins; everyone else is told "taken". Otherwise "open",
   * or "taken" while it is paused or probed.
   */
  async claimProbe(key: string, opts: { leaseMs: number }): Promise<ProbeAnswer> {
    if (!this.halfOpen(key)) return this.isPaused(key) ? "taken" : "open";
    const now = this.clock.now();
    const ticket = { ...levelOf(key), until: this.clock.deadline(opts.leaseMs) };
    // Claimed in this process before the store answers: concurrent requests here see it taken.
    this.#states.set(key, { ...this.get(key), probeUntil: ticket.until });
    const stored = await this.opts.probes?.claim({ ...ticket, now }) ?? null;
    if (stored === null || stored === "claimed") return ticket;
    // Another instance probes it, or its state moved on there: take the stored view.
    this.#states.set(key, { ...stored });
    return stored.pausedUntil === null ? "open" : "taken";
  }

  /**
   * The probe's request ended with no word on the upstream's health (the caller's own error,
   * an abort, a lost hedge): the next request may probe it. A success or failure already
   * settled it, and then this does nothing.
   */
  probeEnded(ticket: ProbeTicket): void {
    const key = cooldownKey(ticket.upstream, ticket.model);
    const s = this.get(key);
    if (s.probeUntil !== ticket.until) return;
    this.#states.set(key, { ...s, probeUntil: null });
    this.opts.probes?.release(ticket);
  }

  all(): CooldownState[] {
    return [...this.#states.values()];
  }

  /** A failure charged to the level; `code` is the error's, kept as the pause's reason. */
  failure(key: string, code?: string): void {
    const policy = this.opts.policy();
    const s = this.get(key);
    const failures = s.consecutiveFailures + 1;
    // Half-open: one failure is enough to pause it again, for the doubled pause.
    const reopened = s.pausedUntil !== null && s.pausedUntil <= this.clock.now();
    if (failures < policy.failuresToPause && !reopened) {
      return this.#set({ ...s, consecutiveFailures: failures });
    }
    const secs = Math.min(policy.pauseSecs * 2 ** s.pauseCount, policy.maxPauseSecs);
    this.#set({
      ...s,
      consecutiveFailures: 0,
      pauseCount: s.pauseCount + 1,
      pausedUntil: this.clock.deadline(secs * 1000),
      probeUntil: null,
      reason: reopened ? probeReason(code) : pauseReason(failures, code),
    });
  }

  /** A 429's Retry-After pauses the level for that long, capped. */
  pauseFor(key: string, secs: number): void {
    const capped = Math.min(secs, this.opts.policy().maxPauseSecs);
    const until = this.clock.deadline(capped * 1000);
    const s = this.get(key);
    if ((s.pausedUntil ?? 0) >= until) return;
    this.#set({
      ...s,
      pausedUntil: until,
      probeUntil: null,
      reason: `rate limited: Retry-After ${secs} s`,
    });
  }

  /**
   * An operator's resume of an upstream: it and every member of it known here are tried again
   * at once, their failure counts cleared (docs/admin.md "Upstream health").
   */
  resume(upstream: string): void {
    for (const s of this.all()) {
      if (s.upstream === upstream && s.model !== null) {
        this.#set({ ...RESET, upstream, model: s.model });
      }
    }
    this.#set({ ...RESET, upstream, model: null });
  }

  success(key: string): void {
    const s = this.#states.get(key);
    if (s === undefined) return; // never charged: nothing to reset
    if (
      s.consecutiveFailures === 0 && s.pauseCount === 0 && s.pausedUntil === null &&
      s.probeUntil === null
    ) return;
    this.#set({ ...RESET, ...levelOf(key) });
  }

  #set(s: Omit<CooldownState, "updatedAt">): void {
    const next = { ...s, updatedAt: this.clock.now() };
    this.#states.set(cooldownKey(s.upstream, s.model), next);
    this.opts.save(next);
  }
}

function probeReason(code: string | undefined): string {
  return code ? `the probe after a pause failed: ${code}` : "the probe after a pause failed";
}

function pauseReason(failures: number, code: string | undefined): string {
  const count = `${failures} failure${failures === 1 ? "" : "s"} in a row`;
  return code ? `${count}; last: ${code}` : count;
}
