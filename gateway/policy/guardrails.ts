import { z } from "zod";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { Logger } from "../runtime/logger.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { guardedText } from "./guarded_text.ts";
import type { GuardrailMatcher, MatchResult, UncheckedReason } from "./guardrail_matcher.ts";

/**
 * Guardrails (docs/observability.md): checks on a request's input, before any upstream is
 * called. `{"enabled": true}` alone is a complete document.
 */
const RuleSchema = z.object({
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    error: "must be 1-64 characters of a-z, 0-9, '.', '_' or '-'",
  }).describe("Name of the rule; it appears in the error a blocked client reads."),
  pattern: z.string().min(1).refine(compiles, { error: "must be a valid regular expression" })
    .describe(
      "Regular expression matched against every string and key of the request body the upstream sees (docs/security.md).",
    ),
  flags: z.string().regex(/^[imsu]*$/, { error: "may only hold the flags i, m, s and u" })
    .default("i").describe("Regular expression flags."),
  message: z.string().max(500).default("the request was blocked by a guardrail")
    .describe("What the blocked client is told."),
  routes: z.array(z.string()).optional().describe("Routes the rule applies to; all when omitted."),
  enabled: z.boolean().default(true).describe("Set to false to switch this rule off."),
}).strict().refine((rule) => compiles(rule.pattern, rule.flags), {
  error: "pattern must be a valid regular expression with these flags",
  path: ["pattern"],
});

export const GuardrailsSchema = z.object({
  enabled: z.boolean().default(false).describe("Master switch for every rule below."),
  max_input_chars: z.int().min(1).max(100_000_000).nullable().default(null)
    .describe(
      "Blocks a request whose checked text (every string and key of the body the upstream sees) is longer than this.",
    ),
  max_checked_chars: z.int().min(1).max(100_000_000).default(1_000_000)
    .describe(
      "The most text the rules read per request. A longer request is not checked: `on_unchecked` decides.",
    ),
  budget_ms: z.int().min(1).max(60_000).default(250)
    .describe(
      "Real milliseconds all rules together may run on one request (in a child process, never on the serving thread), and the longest a check waits for that process; past it `on_unchecked` decides. Not scaled by the test time scale.",
    ),
  on_unchecked: z.enum(["block", "allow"]).default("block")
    .describe(
      "What happens to a request the rules could not check in full (text over `max_checked_chars`, a file in a text media type that cannot be decoded, an embeddings input given as token ids, budget spent, the rules' process busy for longer than the budget, or unavailable): `block` answers 400 `guardrail.unchecked`; `allow` forwards it. Either way it is logged and counted in `pulsegate_guardrail_unchecked_total`.",
    ),
  rules: z.array(RuleSchema).default([]).describe("Patterns that block a request."),
}).strict();

export type Guardrails = z.output<typeof GuardrailsSchema>;

export const GUARDRAILS_OFF: Guardrails = GuardrailsSchema.parse({});

function compiles(pattern: string, flags = ""): boolean {
  try {
    new RegExp(pattern, flags);
    return true;
  } catch {
    return false;
  }
}

/** What the guardrails need from the running gateway. */
export interface GuardrailDeps {
  state: { guardrails: () => Guardrails; guardrailMatcher: GuardrailMatcher };
  metrics: Metrics;
  log: Logger;
}

/**
 * Throws `guardrail.blocked` (a 400 in the client's format) when a rule matches
 * the request body the upstream would see, and `guardrail.unchecked` when the
 * rules could not read it all and `on_unchecked` is `block`. The rules run on
 * a worker within `budget_ms` (docs/security.md, "Guardrails are bounded").
 * `tokens`: the body holds token ids (an embeddings input), which no rule can read.
 * Answers null when the guardrails are off.
 */
export function checkGuardrails(
  body: unknown,
  opts: { model: string; deps: GuardrailDeps; tokens?: boolean },
): Promise<void> | null {
  const rails = opts.deps.state.guardrails();
  // Off (the default): null, so the request path awaits nothing for them.
  if (!rails.enabled) return null;
  return checkEnabled(body, { ...opts, rails });
}

async function checkEnabled(
  body: unknown,
  opts: { model: string; deps: GuardrailDeps; rails: Guardrails; tokens?: boolean },
): Promise<void> {
  const { rails } = opts;
  const rules = rails.rules.filter((rule) =>
    rule.enabled && (!rule.routes || rule.routes.includes(opts.model))
  );
  // Walking the whole body is the costly part: only when something will read the text.
  if (rules.length === 0 && rails.max_input_chars === null) return;
  // Past both caps nothing more is decided by reading on, so the walk stops there.
  const limit = Math.max(rails.max_checked_chars, rails.max_input_chars ?? 0);
  const read = guardedText(body, { limit });
  const length = read.over ? Infinity : read.text.length;
  if (rails.max_input_chars !== null && length > rails.max_input_chars) {
    throw blocked(`input is longer than ${rails.max_input_chars} characters`);
  }
  if (rules.length === 0) return;
  const result: MatchResult = length > rails.max_checked_chars
    ? { kind: "unchecked", reason: "size" }
    : await opts.deps.state.guardrailMatcher.match(read.text, {
      rules,
      budgetMs: rails.budget_ms,
    });
  if (result.kind === "matched") {
    const rule = rules[result.rule]!;
    throw blocked(`${rule.message} (${rule.id})`);
  }
  // What was read is clear, but a file that should hold text, or token ids, could not be read.
  const reason = result.kind === "unchecked"
    ? result.reason
    : read.undecodable
    ? "undecodable"
    : opts.tokens && "tokens";
  if (reason) unchecked(reason, { rails, deps: opts.deps });
}

const UNCHECKED_WHY = {
  size: (rails: Guardrails) =>
    `input is longer than the ${rails.max_checked_chars} characters the guardrails read`,
  budget: (rails: Guardrails) => `the guardrails could not finish within ${rails.budget_ms} ms`,
  busy: (rails: Guardrails) => `the guardrails were busy for longer than ${rails.budget_ms} ms`,
  unavailable: () => "the guardrails could not run",
  tokens: () => "the guardrails cannot read token ids (input given as token arrays)",
  undecodable: () =>
    "the guardrails could not read a file sent as text (not valid base64, percent-encoding or text in its charset)",
};

function unchecked(
  reason: UncheckedReason,
  opts: { rails: Guardrails; deps: GuardrailDeps },
): void {
  const outcome = opts.rails.on_unchecked === "block" ? "blocked" : "allowed";
  opts.deps.metrics.guardrailUnchecked.inc({ reason, outcome });
  opts.deps.log.event("guardrail.unchecked", { reason, outcome });
  if (outcome === "allowed") return;
  throw new GatewayError(UNCHECKED_WHY[reason](opts.rails), {
    code: "guardrail.unchecked",
  });
}

function blocked(message: string): GatewayError {
  return new GatewayError(message, { code: "guardrail.blocked" });
}
