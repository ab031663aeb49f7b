import type { Budget } from "../config/limits_schema.ts";

/** rpm and tpm count the last 60 seconds, in one-second steps. */
export const WINDOW_MS = 60_000;
const DAY_MS = 86_400_000;

export function dayStart(at: number): number {
  return Math.floor(at / DAY_MS) * DAY_MS;
}

export function monthStart(at: number): number {
  const d = new Date(at);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** Where the budget's current UTC period began and where it ends (epoch ms). */
export function budgetPeriod(period: Budget["period"], at: number): { from: number; to: number } {
  if (period === "day") return { from: dayStart(at), to: dayStart(at) + DAY_MS };
  const d = new Date(at);
  return { from: monthStart(at), to: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
}

/** A sliding-window count: its total, and when it first falls under `limit`. */
export function slidingUse(
  buckets: readonly { start: number; value: number }[],
  opts: { now: number; limit?: number },
): { used: number; freesAt: number | null } {
  const live = buckets.filter((b) => b.start > opts.now - WINDOW_MS && b.value > 0)
    .sort((a, b) => a.start - b.start);
  const used = live.reduce((sum, b) => sum + b.value, 0);
  if (opts.limit === undefined || used < opts.limit) return { used, freesAt: null };
  // Oldest buckets leave the window first; the window frees once enough of them have left.
  let left = used;
  for (const b of live) {
    left -= b.value;
    if (left < opts.limit) return { used, freesAt: b.start + WINDOW_MS };
  }
  return { used, freesAt: opts.now + WINDOW_MS };
}
