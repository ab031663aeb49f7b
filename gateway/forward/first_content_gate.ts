/**
 * Who may answer the client. A hedged start runs several hops at once
 * (docs/liveness.md, "Hedged start"); the first to reach its first content
 * claims the answer and the others are stopped. A hop that is not hedged
 * passes an open gate. The stream pump and the whole-answer reader ask the
 * gate; the race behind it (hedge_race.ts) never reaches into a hop.
 */
export interface FirstContentGate {
  /** This hop's first content: true when it may answer, false when another hop claimed first. */
  claim(): boolean;
  /** Whether another hop could still claim the answer, so none of this one's bytes may go out. */
  readonly contested: boolean;
  /** Whether the hop's reported usage waits for its claim (a loser's stays on its own row). */
  readonly holdsUsage: boolean;
}

export const OPEN_GATE: FirstContentGate = Object.freeze({
  claim: () => true,
  contested: false,
  holdsUsage: false,
});
