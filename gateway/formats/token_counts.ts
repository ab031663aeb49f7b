import type { IrUsage } from "./ir.ts";

/**
 * The most tokens one count of one answer may report: ten times the largest context window
 * served today (about 1-2 million tokens), so no honest answer reaches it, while a count at it
 * prices to at most a few thousand USD rather than the 9×10⁹ USD an upstream's
 * `Number.MAX_SAFE_INTEGER` once billed (docs/security.md "Numbers an upstream reports").
 */
export const MAX_TOKEN_COUNT = 20_000_000;

/** The counts of a usage report, each checked on its own. */
export type UsageField = keyof IrUsage;

const FIELDS: readonly UsageField[] = [
  "inputTokens",
  "outputTokens",
  "cachedTokens",
  "cacheWriteTokens",
  "cacheWrite1hTokens",
  "reasoningTokens",
];

/** Whether an upstream's number is a token count the gateway takes: whole, from 0 to the cap. */
export function isTokenCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 &&
    value <= MAX_TOKEN_COUNT;
}

/**
 * Checks an upstream's usage report in place and answers the fields it refused. A count that is
 * not a whole number from 0 to MAX_TOKEN_COUNT (negative, fractional, `1e400` read as Infinity,
 * NaN from a decoder's sum) is removed, so the hop's row keeps what it had and the usage ledger
 * estimates in its place (docs/observability.md "Token usage"). Cache counts are parts of the
 * input: cut to it when the same report states the input, as are the 1-hour writes to the writes.
 * In place, because the decoder hands the same object to the frame and to its usage event: a
 * translated answer's client then reads the checked counts too.
 */
export function checkUsage(usage: IrUsage): UsageField[] {
  let refused: UsageField[] | null = null;
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let i = 0; i < FIELDS.length; i++) {
    const field = FIELDS[i]!;
    const value = usage[field];
    if (value === undefined || isTokenCount(value)) continue;
    delete usage[field];
    (refused ??= []).push(field);
  }
  cutCacheCounts(usage);
  return refused ?? NONE;
}

const NONE: UsageField[] = [];

/** Cache reads and writes are parts of the input (docs/observability.md "Cache tokens"). */
export function cutCacheCounts(
  usage: {
    inputTokens?: number | null;
    cachedTokens?: number | null;
    cacheWriteTokens?: number | null;
    cacheWrite1hTokens?: number | null;
  },
): void {
  const input = usage.inputTokens;
  if (typeof input === "number") {
    if (typeof usage.cachedTokens === "number" && usage.cachedTokens > input) {
      usage.cachedTokens = input;
    }
    const left = input - (usage.cachedTokens ?? 0);
    if (typeof usage.cacheWriteTokens === "number" && usage.cacheWriteTokens > left) {
      usage.cacheWriteTokens = left;
    }
  }
  const written = usage.cacheWriteTokens;
  if (
    typeof written === "number" && typeof usage.cacheWrite1hTokens === "number" &&
    usage.cacheWrite1hTokens > written
  ) usage.cacheWrite1hTokens = written;
}
