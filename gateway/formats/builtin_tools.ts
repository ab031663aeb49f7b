import type { UpstreamKind } from "./format.ts";
import type { IrBuiltinTool, IrRequest } from "./ir.ts";

/**
 * Provider-run tools each upstream kind has an equivalent for, and its form:
 * Anthropic's `web_search` server tool, Gemini's `googleSearch` (the Interactions
 * API's `google_search`), Responses' `web_search`. Chat Completions searches only with dedicated search models
 * and Converse has no search tool, so neither takes one.
 */
const SUPPORTED: Record<UpstreamKind, ReadonlySet<IrBuiltinTool["type"]>> = {
  "openai-chat": new Set(),
  "openai-responses": new Set(["web_search"]),
  "anthropic": new Set(["web_search"]),
  "gemini": new Set(["web_search"]),
  "bedrock": new Set(),
  "gemini-interactions": new Set(["web_search"]),
};

export function supportsBuiltin(kind: UpstreamKind, tool: IrBuiltinTool): boolean {
  return SUPPORTED[kind].has(tool.type);
}

/**
 * The built-in tools of a request that `kind` has no equivalent for, one
 * description each. The engine skips such a candidate unless its route sets
 * `drop_unsupported_tools`; the builders then leave these tools out.
 */
export function unsupportedBuiltins(ir: IrRequest, kind: UpstreamKind): string[] {
  const missing = (ir.builtinTools ?? []).filter((t) => !supportsBuiltin(kind, t));
  return [...new Set(missing.map((t) => `built-in tool ${t.type}`))];
}
