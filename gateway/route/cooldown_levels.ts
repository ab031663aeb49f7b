import { cooldownKey, type Cooldowns, type ProbeTicket } from "./cooldown.ts";

/**
 * What a candidate is to cooldown: its upstream and the model it is sent there, the member
 * (docs/design.md "Cooldown"). A pool member and a plain candidate alike.
 */
export interface Member {
  upstream: string;
  model: string;
}

/**
 * Whose cooldown a failure is charged to, as the verdict table says for how the hop ended
 * (gateway/forward/verdict.ts, docs/design.md "Cooldown"):
 * - `member`: the member alone; the fault names its model (the model is not there), so the
 *   upstream's other models are not to blame.
 * - `upstream`: the upstream as a whole; nothing of the model is in it (the connection).
 * - `both`: the member, and the upstream as a whole. The fault may be the model's or the whole
 *   upstream's (a 5xx, a 429, a silence, an answer the gateway cannot read): the member's count
 *   is reset only by its own success, the upstream's by a success of any of its models, so the
 *   upstream pauses only when its failures come with no answer from any model between them.
 */
export type Charge = "member" | "upstream" | "both";

type Level = "upstream" | "member";

/** The levels each charge lands on, the upstream's first (the order probes are claimed in). */
const LEVELS: Readonly<Record<Charge, readonly Level[]>> = {
  member: ["member"],
  upstream: ["upstream"],
  both: ["upstream", "member"],
};

const BOTH = LEVELS.both;

function keyOf(m: Member, level: Level): string {
  return level === "upstream" ? cooldownKey(m.upstream) : cooldownKey(m.upstream, m.model);
}

/** Paused, or probed by another request, at either level: not to be sent new requests. */
export function memberBlocked(cooldowns: Cooldowns, m: Member): boolean {
  return BOTH.some((level) => cooldowns.isPaused(keyOf(m, level)));
}

/** When the later of its two pauses ends (epoch ms; 0 when neither is paused). */
export function memberPausedUntil(cooldowns: Cooldowns, m: Member): number {
  return Math.max(...BOTH.map((level) => cooldowns.get(keyOf(m, level)).pausedUntil ?? 0));
}

/** Whether a level's pause ended and its probe is free (`recoveringLevels`, without building it). */
export function recovering(cooldowns: Cooldowns, m: Member): boolean {
  return BOTH.some((level) => cooldowns.halfOpen(keyOf(m, level)));
}

/** The levels whose pause ended and whose probe is free: a request to it probes them. */
export function recoveringLevels(cooldowns: Cooldowns, m: Member): Level[] {
  return BOTH.filter((level) => cooldowns.halfOpen(keyOf(m, level)));
}

/** A failure of the member's, charged as the verdict says; `code` is kept as a pause's reason. */
export function chargeFailure(
  cooldowns: Cooldowns,
  m: Member,
  opts: { charge: Charge; code?: string },
): void {
  for (const level of LEVELS[opts.charge]) cooldowns.failure(keyOf(m, level), opts.code);
}

/** The member answered: it is healthy, and so is its upstream as a whole. */
export function chargeSuccess(cooldowns: Cooldowns, m: Member): void {
  // Both levels by hand, not a for-of: until optimized it makes an object per step, on every
  // answer (docs/performance_log.md "A request plan").
  cooldowns.success(keyOf(m, "upstream"));
  cooldowns.success(keyOf(m, "member"));
}

/** Whether a charge counts against the level a probe holds (else the probe said nothing of it). */
export function chargeReaches(charge: Charge, ticket: ProbeTicket): boolean {
  return LEVELS[charge].includes(ticket.model === null ? "upstream" : "member");
}

/**
 * The probes a request needs to send to the member: one per level whose pause ended, the
 * upstream's first, each claimed as Cooldowns.claimProbe does. Answers the tickets held (empty:
 * nothing to probe, the member is open), or "taken" when another request probes a level (what
 * was claimed here is given back).
 */
export async function claimMemberProbes(
  cooldowns: Cooldowns,
  m: Member,
  opts: { leaseMs: number },
): Promise<ProbeTicket[] | "taken"> {
  const tickets: ProbeTicket[] = [];
  for (const level of BOTH) {
    const answer = await cooldowns.claimProbe(keyOf(m, level), opts);
    if (typeof answer === "object") tickets.push(answer);
    else if (answer === "taken") {
      for (const ticket of tickets) cooldowns.probeEnded(ticket);
      return "taken";
    }
  }
  return tickets;
}
