import { openAiWords } from "../error_vocab.ts";
import type { GatewayError } from "../../runtime/gateway_error.ts";

/** The OpenAI error object, shared by Chat Completions and Responses clients. */
export function openAiError(err: GatewayError): { error: Record<string, unknown> } {
  const { type, code } = openAiWords(err);
  return { error: { message: err.publicMessage, type, param: err.param ?? null, code } };
}
