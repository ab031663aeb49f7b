import type { Clock } from "../runtime/clock.ts";

export interface CooldownState {
  upstream: string;
  consecutiveFailures: number;
  pauseCount: number;
  pausedUntil: number | null; // epoch ms, real time
  /** Why it was last paused, for the operator (e.g. "3 failures in a row; last: gw.upstream.error"). */
  reason: string | null;
  updatedAt: number;
}

const RESET = { consecutiveFailures: 0, pauseCount: 0, pausedUntil: null, reason: null };

export interface CooldownPolicy {
  failuresToPause: number;
  pauseSecs: number;
  maxPauseSecs: number;
}

/**
 * docs/design.md "Failover before content" cooldown: consecutive failures pause an upstream, each further
 * pause doubles up to the cap, one success resets it. State is handed to
 * `save` on every change so it survives a restart.
 */
export class Cooldowns {
  #states = new Map<string, CooldownState>();

  constructor(
    private clock: Clock,
    private opts: { policy: () => CooldownPolicy; save: (s: CooldownState) => void },
  ) {}

  load(states: CooldownState[]): void {
    for (const s of states) this.#states.set(s.upstream, { ...s });
  }

  get(upstream: string): CooldownState {
    return this.#states.get(upstream) ??
      { ...RESET, upstream, updatedAt: 0 };
  }

  isPaused(upstream: string): boolean {
    const until = this.get(upstream).pausedUntil;
    return until !== null && until > this.clock.now();
  }

  all(): CooldownState[] {
    return [...this.#states.values()];
  }

  /** A failure charged to the upstream; `code` is the error's, kept as the pause's reason. */
  failure(upstream: string, code?: string): void {
    const policy = this.opts.policy();
    const s = this.get(upstream);
    const failures = s.consecutiveFailures + 1;
    if (failures < policy.failuresToPause) {
      return this.#set({ ...s, consecutiveFailures: failures });
    }
    const secs = Math.min(policy.pauseSecs * 2 ** s.pauseCount, policy.maxPauseSecs);
    this.#set({
      ...s,
      consecutiveFailures: 0,
      pauseCount: s.pauseCount + 1,
      pausedUntil: this.clock.now() + secs * 1000 * this.clock.scale,
      reason: pauseReason(failures, code),
    });
  }

  /** A 429's Retry-After pauses the upstream for that long, capped. */
  pauseFor(upstream: string, secs: number): void {
    const capped = Math.min(secs, this.opts.policy().maxPauseSecs);
    const until = this.clock.now() + capped * 1000 * this.clock.scale;
    const s = this.get(upstream);
    if ((s.pausedUntil ?? 0) >= until) return;
    this.#set({ ...s, pausedUntil: until, reason: `rate limited: Retry-After ${secs} s` });
  }

  /** An operator's resume: the upstream is tried again at once, its failure count cleared. */
  resume(upstream: string): void {
    this.#set({ ...RESET, upstream });
  }

  success(upstream: string): void {
    const s = this.get(upstream);
    if (s.consecutiveFailures === 0 && s.pauseCount === 0 && s.pausedUntil === null) return;
    this.#set({ ...RESET, upstream });
  }

  #set(s: Omit<CooldownState, "updatedAt">): void {
    const next = { ...s, updatedAt: this.clock.now() };
    this.#states.set(s.upstream, next);
    this.opts.save(next);
  }
}

function pauseReason(failures: number, code: string | undefined): string {
  const count = `${failures} failure${failures === 1 ? "" : "s"} in a row`;
  return code ? `${count}; last: ${code}` : count;
}
