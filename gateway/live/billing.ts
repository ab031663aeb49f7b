import type { Config } from "../config/schema.ts";
import type { Price } from "../config/limits_schema.ts";
import type { AttemptRecord } from "../../db/records.ts";

/** What one ended hop billed, as key limits count it (docs/config.md "Prices and key limits"). */
export interface Billed {
  tokens: number;
  costUsd: number | null;
}

/**
 * Prices a request's hops from the config it was admitted under, and tells the key's
 * usage meter what each hop billed.
 */
export interface Billing {
  /** Sets the hop's `costUsd` from its tokens, and reports the hop as billed. */
  bill(hop: AttemptRecord, opts: { cachedTokens: number | null }): void;
}

const PER_MILLION = 1_000_000;

/**
 * USD for one hop; null when the upstream lists no price for the model. The IR counts cached
 * input inside `inputTokens` (as OpenAI does), so the cached share is taken out and priced at
 * `cached_input` (or `input` when that is not given).
 */
export function hopCost(
  price: Price | undefined,
  tokens: { input: number | null; output: number | null; cached: number | null },
): number | null {
  if (!price) return null;
  const input = tokens.input ?? 0;
  const cached = Math.min(tokens.cached ?? 0, input);
  const usd = (input - cached) * price.input + cached * (price.cached_input ?? price.input) +
    (tokens.output ?? 0) * price.output;
  return usd / PER_MILLION;
}

export function billingFor(
  config: Config,
  opts: { onBilled?: (billed: Billed) => void } = {},
): Billing {
  const prices = new Map(config.upstreams.map((u) => [u.id, u.prices]));
  return {
    bill(hop, { cachedTokens }) {
      const price = prices.get(hop.upstream)?.[hop.model];
      hop.costUsd = hopCost(price, {
        input: hop.inputTokens,
        output: hop.outputTokens,
        cached: cachedTokens,
      });
      const tokens = (hop.inputTokens ?? 0) + (hop.outputTokens ?? 0);
      if (tokens > 0 || hop.costUsd) opts.onBilled?.({ tokens, costUsd: hop.costUsd });
    },
  };
}

/** A request's cost: the sum over its hops that had a price, null when none had. */
export function requestCost(hops: readonly { costUsd: number | null }[]): number | null {
  let total: number | null = null;
  for (const hop of hops) {
    if (hop.costUsd !== null) total = (total ?? 0) + hop.costUsd;
  }
  return total;
}
