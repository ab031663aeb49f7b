/** What every target check shares: number formatting, profile shares, the run's context. */
import type { BenchResults, HotPathProfile, HotSpot, Machine, TargetCheck } from "../results.ts";
import { round } from "../stats.ts";

export type Scenarios = BenchResults["scenarios"];

/** What every check may quote besides its own scenario. */
export interface Context {
  scenarios: Scenarios;
  /** The serving thread's profiles: whole answers, streams. */
  hot: HotPathProfile | null;
  hotStream: HotPathProfile | null;
  /** The same while held streams get their content; absent from older runs. */
  hotHeld?: HotPathProfile | null;
  machine: Machine | null;
}

export const fmt = (n: number, digits = 2) =>
  Number.isFinite(n) ? round(n, digits).toString() : "n/a";

export const capital = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

export function unmeasured(id: string, target: string, why: string): TargetCheck {
  return { id, target, measured: "not measured", met: null, gap: why, closeWith: "" };
}

/** A share of the serving thread's profile: names matching `pattern`, summed. */
export function shareOf(list: HotSpot[], pattern: RegExp): number {
  return list.filter((h) => pattern.test(h.name)).reduce((a, h) => a + h.selfPercent, 0);
}

/** The same in words; a name below the profile's listed top is "under" its last share. */
export function shareText(list: HotSpot[], pattern: RegExp): string {
  const sum = shareOf(list, pattern);
  if (sum > 0) return `${fmt(sum, 1)} %`;
  return `under ${fmt(list.at(-1)?.selfPercent ?? 0, 1)} %`;
}
