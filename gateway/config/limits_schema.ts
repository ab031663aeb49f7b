/**
 * Prices per upstream model and limits per gateway key (docs/config.md "Prices and key
 * limits"). Kept apart from schema.ts so the upstream and key schemas each gain one line.
 */
import { z } from "zod";

function usdPerMillion(what: string) {
  return z.number({ error: "must be a number of USD per million tokens, 0 or more" })
    .min(0, { error: "must be 0 or more" }).max(1_000_000, { error: "must be at most 1000000" })
    .describe(`USD per million ${what}.`);
}

export const PriceSchema = z.object({
  input: usdPerMillion("input (prompt) tokens"),
  output: usdPerMillion("output tokens, reasoning included"),
  cached_input: usdPerMillion("input tokens read from the provider's prompt cache").optional()
    .describe(
      "USD per million input tokens read from the provider's prompt cache. Omit for the " +
        "provider's rule: 0.1 x input for Claude (an anthropic upstream, or a Claude model on " +
        'bedrock), the input price for every other (docs/observability.md "Cache tokens").',
    ),
  cache_write: usdPerMillion("input tokens written to the provider's prompt cache").optional()
    .describe(
      "USD per million input tokens written to the provider's prompt cache (Anthropic's " +
        "5-minute cache). Omit for the provider's rule: 1.25 x input for Claude, the input " +
        "price for every other.",
    ),
  cache_write_1h: usdPerMillion("input tokens written to a one-hour prompt cache").optional()
    .describe(
      "USD per million input tokens written to the one-hour prompt cache (Anthropic and " +
        'Bedrock `ttl: "1h"`). Omit for the provider\'s rule: 2 x input for Claude, ' +
        "`cache_write` for every other.",
    ),
}).strict();

/** The upstream field: prices keyed by the model name candidates send to this upstream. */
export const pricesField = () =>
  z.record(z.string().regex(/^\S{1,256}$/), PriceSchema).optional().describe(
    "Optional price table keyed by the upstream model name (a candidate's `model`). Gives " +
      "each attempt and request a cost in history, metrics and the admin page; models not " +
      "listed cost nothing recorded (null).",
  );

export const BudgetSchema = z.object({
  usd: z.number({ error: "must be a number of USD" }).positive({ error: "must be above 0" })
    .describe("Most USD this key may spend per period (from the prices of its attempts)."),
  period: z.enum(["day", "month"], { error: 'must be "day" or "month"' }).describe(
    "Calendar period in UTC the budget covers; it renews at 00:00 UTC on the next day or month.",
  ),
}).strict();

export const SessionBudgetSchema = z.object({
  usd: z.number({ error: "must be a number of USD" }).positive({ error: "must be above 0" })
    .optional().describe("Most USD one session may spend (from the prices of its attempts)."),
  tokens: z.int({ error: "must be a whole number between 1 and 1000000000000" })
    .min(1, { error: "must be at least 1" }).max(1e12, { error: "must be at most 1000000000000" })
    .optional().describe("Most billed tokens (input + output) one session may use."),
  requests: z.int({ error: "must be a whole number between 1 and 1000000000" })
    .min(1, { error: "must be at least 1" }).max(1e9, { error: "must be at most 1000000000" })
    .optional().describe("Most requests one session may send to an upstream."),
}).strict().refine(
  (b) => b.usd !== undefined || b.tokens !== undefined || b.requests !== undefined,
  {
    error: "give at least one of usd, tokens, requests",
  },
);

export const LoopBreakerSchema = z.object({
  repeats: z.int({ error: "must be a whole number between 2 and 100" })
    .min(2, { error: "must be at least 2" }).max(100, { error: "must be at most 100" })
    .describe(
      "The copy of one request body, within the window and one session, that is refused: 3 " +
        "lets two identical requests through and answers the third 429.",
    ),
  window_secs: z.number({ error: "must be a number of seconds" })
    .positive({ error: "must be above 0" }).max(86_400, { error: "must be at most 86400" })
    .describe("Seconds over which identical request bodies are counted."),
}).strict();

function perMinute(what: string, verb: string) {
  return z.int({ error: "must be a whole number between 1 and 1000000000" })
    .min(1, { error: "must be at least 1" }).max(1e9, { error: "must be at most 1000000000" })
    .optional().describe(
      `Most ${what} this key may ${verb} in any 60 seconds; over it, requests are answered 429 ` +
        "(gw.key.rate_limited) with Retry-After. Omit for no limit.",
    );
}

/** The key fields, spread into the key schema. */
export const keyLimitFields = () => ({
  max_in_flight: z.int({ error: "must be a whole number between 1 and 1000000" })
    .min(1, { error: "must be at least 1" }).max(1_000_000, { error: "must be at most 1000000" })
    .optional().describe(
      "Most requests this key may have in progress at once in one gateway process, counted " +
        "from admission (before the body is read) until the request's row closes, streams " +
        "included, and an embeddings answer until its client has read it; more are answered " +
        "429 (gw.key.max_in_flight) with Retry-After. Omit for no limit.",
    ),
  rpm: perMinute("requests", "send"),
  tpm: perMinute("billed tokens (input + output of finished attempts)", "use"),
  budget: BudgetSchema.optional().describe(
    "Spending cap per UTC day or month; once the key's cost in the period reaches it, requests " +
      "are answered 429 (gw.key.budget_exhausted) until the period ends. Needs upstream prices.",
  ),
  session_budget: SessionBudgetSchema.optional().describe(
    "Caps on each session of this key (an agent's conversation: docs/observability.md " +
      '"Cache-aware affinity"): once its requests, billed tokens or USD reach a cap, its ' +
      "further requests are answered 429 (gw.session.budget_exhausted). A session's budget does " +
      "not renew; a new session starts from zero.",
  ),
  loop_breaker: LoopBreakerSchema.optional().describe(
    "Opt-in runaway breaker: the same request body sent `repeats` times in one session within " +
      "`window_secs` is answered 429 (gw.session.loop_detected) with Retry-After.",
  ),
});

export type Price = z.output<typeof PriceSchema>;
export type SessionBudget = z.output<typeof SessionBudgetSchema>;
export type LoopBreaker = z.output<typeof LoopBreakerSchema>;
export type Budget = z.output<typeof BudgetSchema>;
