import type { Config } from "../config/schema.ts";
import type { Price } from "../config/limits_schema.ts";
import type { UpstreamKind } from "../runtime/wire_kinds.ts";
import type { AttemptRecord } from "../../db/records.ts";

/** What one ended hop billed, as key limits count it (docs/config.md "Prices and key limits"). */
export interface Billed {
  tokens: number;
  costUsd: number | null;
}

/** A hop's price: its row's `costUsd` and `cacheWriteUsd` (null where the model has none). */
export interface Priced {
  costUsd: number | null;
  cacheWriteUsd: number | null;
}

/**
 * Prices a request's hops from the config it was admitted under, and tells the key's
 * usage meter what each hop billed.
 */
export interface Billing {
  /** The hop's price from its tokens, reported as billed; the hop's row takes it (live_request.ts). */
  bill(hop: Readonly<AttemptRecord>): Priced;
}

const PER_MILLION = 1_000_000;

/**
 * A model's prices with every cache price settled, in USD per million tokens: the config's,
 * or where it gives none the provider's rule (`CACHE_RULES`).
 */
export interface Rates {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  cacheWrite1h: number;
}

/** A provider's cache prices as multiples of its input price. */
interface CacheRule {
  read: number;
  write: number;
  write1h: number;
}

/**
 * Claude's published rule, on Anthropic's API and on Bedrock: a cache read costs 0.1 x input, a
 * write 1.25 x input for the 5-minute cache and 2 x for the 1-hour one (docs/observability.md
 * "Cache tokens", where the providers' pages are cited).
 */
const CLAUDE: CacheRule = { read: 0.1, write: 1.25, write1h: 2 };
/**
 * Where no rule holds for every model (OpenAI's and Gemini's discounts differ per model, and
 * neither surcharges a write unless the config says so): everything at the input price, which
 * never bills less than the provider. `cached_input` in the config gives the discount.
 */
const AS_INPUT: CacheRule = { read: 1, write: 1, write1h: 1 };

/** The rule for a kind and model, one row per kind whose rule differs from AS_INPUT. */
const CACHE_RULES: Partial<Record<UpstreamKind, (model: string) => CacheRule>> = {
  anthropic: () => CLAUDE,
  // Bedrock serves many families; only Claude models bill cache writes this way.
  bedrock: (model) => /anthropic|claude/i.test(model) ? CLAUDE : AS_INPUT,
};

/** The config's price for a model with its cache prices settled for the upstream's kind. */
export function ratesFor(price: Price, opts: { kind: UpstreamKind; model: string }): Rates {
  const rule = CACHE_RULES[opts.kind]?.(opts.model) ?? AS_INPUT;
  const cacheWrite = price.cache_write ?? price.input * rule.write;
  return {
    input: price.input,
    output: price.output,
    cacheRead: price.cached_input ?? price.input * rule.read,
    cacheWrite,
    cacheWrite1h: price.cache_write_1h ??
      (rule === AS_INPUT ? cacheWrite : price.input * rule.write1h),
  };
}

/** A hop's tokens as its row holds them: cache reads and writes are parts of `input`. */
export interface HopTokens {
  input: number | null;
  output: number | null;
  cached: number | null;
  cacheWrite?: number | null;
  cacheWrite1h?: number | null;
}

/** USD for a hop, and the part of it its cache writes cost. */
export interface HopCost {
  usd: number;
  cacheWriteUsd: number;
}

/**
 * USD for one hop; null when the upstream lists no price for the model. The IR counts cache
 * reads and writes inside `inputTokens` (as OpenAI does), so they are taken out and priced at
 * their own rates; counts an upstream reported beyond its input are cut to it.
 */
export function hopCost(rates: Rates | undefined, tokens: HopTokens): HopCost | null {
  if (!rates) return null;
  const input = tokens.input ?? 0;
  const read = Math.min(tokens.cached ?? 0, input);
  const written = Math.min(tokens.cacheWrite ?? 0, input - read);
  const oneHour = Math.min(tokens.cacheWrite1h ?? 0, written);
  const cacheWriteUsd = ((written - oneHour) * rates.cacheWrite + oneHour * rates.cacheWrite1h) /
    PER_MILLION;
  const usd = ((input - read - written) * rates.input + read * rates.cacheRead +
        (tokens.output ?? 0) * rates.output) / PER_MILLION + cacheWriteUsd;
  return { usd: billableAmount(usd), cacheWriteUsd: billableAmount(cacheWriteUsd) };
}

/**
 * An amount a budget counts: finite and 0 or more, anything else 0. Counts are checked where
 * they come in (gateway/formats/token_counts.ts); this is the last line, so a cost or a budget
 * is never NaN, Infinity or a credit (docs/security.md "Numbers an upstream reports").
 */
export function billableAmount(amount: number | null | undefined): number {
  return typeof amount === "number" && Number.isFinite(amount) && amount > 0 ? amount : 0;
}

export function billingFor(
  config: Config,
  opts: { onBilled?: (billed: Billed) => void } = {},
): Billing {
  const rates = new Map<string, Map<string, Rates>>();
  for (const u of config.upstreams) {
    const models = new Map<string, Rates>();
    for (const [model, price] of Object.entries(u.prices ?? {})) {
      models.set(model, ratesFor(price, { kind: u.kind, model }));
    }
    rates.set(u.id, models);
  }
  return {
    bill(hop) {
      const cost = hopCost(rates.get(hop.upstream)?.get(hop.model), {
        input: hop.inputTokens,
        output: hop.outputTokens,
        cached: hop.cachedTokens,
        cacheWrite: hop.cacheWriteTokens,
        cacheWrite1h: hop.cacheWrite1hTokens,
      });
      const costUsd = cost?.usd ?? null;
      const tokens = billableAmount(hop.inputTokens) + billableAmount(hop.outputTokens);
      if (tokens > 0 || costUsd) opts.onBilled?.({ tokens, costUsd });
      return { costUsd, cacheWriteUsd: cost?.cacheWriteUsd ?? null };
    },
  };
}

/** A request's cost: the sum over its hops that had a price, null when none had. */
export function requestCost(hops: readonly { costUsd: number | null }[]): number | null {
  return sumPriced(hops.map((hop) => hop.costUsd));
}

/** A sum of the values that are priced, null when none is. */
export function sumPriced(values: readonly (number | null)[]): number | null {
  let total: number | null = null;
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let i = 0; i < values.length; i++) {
    const usd = values[i]!;
    if (usd !== null) total = (total ?? 0) + usd;
  }
  return total;
}
