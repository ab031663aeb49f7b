import { z } from "zod";
import { GatewayError } from "../runtime/gateway_error.ts";
import type { IrRequest } from "../formats/ir.ts";

/**
 * docs/observability.md guardrails: checks on a request's input, before any upstream is
 * called. `{"enabled": true}` alone is a complete document.
 */
const RuleSchema = z.object({
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    error: "must be 1-64 characters of a-z, 0-9, '.', '_' or '-'",
  }).describe("Name of the rule; it appears in the error a blocked client reads."),
  pattern: z.string().min(1).refine(compiles, { error: "must be a valid regular expression" })
    .describe("Regular expression matched against the request's input text."),
  flags: z.string().regex(/^[imsu]*$/, { error: "may only hold the flags i, m, s and u" })
    .default("i").describe("Regular expression flags."),
  message: z.string().max(500).default("the request was blocked by a guardrail")
    .describe("What the blocked client is told."),
  routes: z.array(z.string()).optional().describe("Routes the rule applies to; all when omitted."),
  enabled: z.boolean().default(true).describe("Set to false to switch this rule off."),
}).strict();

export const GuardrailsSchema = z.object({
  enabled: z.boolean().default(false).describe("Master switch for every rule below."),
  max_input_chars: z.int().min(1).max(100_000_000).nullable().default(null)
    .describe("Blocks a request whose input text is longer than this."),
  rules: z.array(RuleSchema).default([]).describe("Patterns that block a request."),
}).strict();

export type Guardrails = z.output<typeof GuardrailsSchema>;

export const GUARDRAILS_OFF: Guardrails = GuardrailsSchema.parse({});

function compiles(pattern: string): boolean {
  try {
    new RegExp(pattern);
    return true;
  } catch {
    return false;
  }
}

/** Everything the caller sends to the model, as one text to check. */
function inputText(ir: IrRequest): string {
  const parts: string[] = ir.system ? [ir.system] : [];
  for (const m of ir.messages) {
    for (const p of m.content) {
      if (p.type === "text" || p.type === "reasoning" || p.type === "refusal") parts.push(p.text);
      else if (p.type === "tool_result") parts.push(p.content);
      else if (p.type === "tool_call") parts.push(p.arguments);
    }
  }
  return parts.join("\n");
}

/** Throws `guardrail.blocked` (a 400 in the client's format) when a rule matches. */
export function checkGuardrails(ir: IrRequest, rails: Guardrails): void {
  if (!rails.enabled) return;
  const text = inputText(ir);
  if (rails.max_input_chars !== null && text.length > rails.max_input_chars) {
    throw blocked(`input is longer than ${rails.max_input_chars} characters`);
  }
  for (const rule of rails.rules) {
    if (!rule.enabled || (rule.routes && !rule.routes.includes(ir.model))) continue;
    if (new RegExp(rule.pattern, rule.flags).test(text)) {
      throw blocked(`${rule.message} (${rule.id})`);
    }
  }
}

function blocked(message: string): GatewayError {
  return new GatewayError(message, { code: "guardrail.blocked" });
}
