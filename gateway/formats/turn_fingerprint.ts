import { createHash, type Hash } from "node:crypto";
import type { IrPart, IrRequest } from "./ir.ts";
import { guardedParse } from "./json_guard.ts";

/**
 * The turn a request carries, as a digest of its conversation on the neutral IR, so an aborted
 * turn re-sent by its agent is known again (docs/design.md "Abort and disconnect", turn fences).
 *
 * It covers what makes the turn: the system prompt, then each message's role and parts in order:
 * text (adjacent text parts joined, so one string and a list of text blocks are alike), a tool
 * call's name and arguments (as canonical JSON, so a JSON string and an object are alike), a tool
 * result's content and error flag, a refusal's text, an image by its media type and bytes or its
 * URL; and the provider-kept state the request continues (`previous_response_id`, a stored
 * interaction), which is part of its conversation though not in its messages.
 *
 * It ignores what a client changes when it re-sends the same turn: the client format (the IR is
 * the same whatever format carried it), the model, `stream`, token limits, sampling parameters,
 * stop sequences, thinking settings, tools offered and tool choice, response format, metadata and
 * user ids, client-side request ids, cache marks (`cache_control`), tool-call ids (each format
 * mints its own, Gemini none), reasoning parts (opaque, signed, and dropped by translation) and
 * Claude Code's billing line in the system prompt (`BILLING_LINE`).
 *
 * SHA-256, hex. Computed only when a turn fence could match (gateway/live/fence_set.ts), and once
 * per aborted request, never for every request.
 */
export function turnFingerprint(ir: IrRequest): string {
  const hash = createHash("sha256");
  field(hash, "system", (ir.system ?? "").replace(BILLING_LINE, ""));
  for (const message of ir.messages) {
    field(hash, "role", message.role);
    let text: string[] = [];
    const flush = () => {
      if (text.length) field(hash, "text", text.join(""));
      text = [];
    };
    for (const part of message.content) {
      if (part.type === "text") text.push(part.text);
      else if (part.type !== "reasoning") {
        flush();
        addPart(hash, part);
      }
    }
    flush();
  }
  if (ir.providerState?.continues !== undefined) {
    field(hash, "continues", ir.providerState.continues);
  }
  for (const c of ir.continuations ?? []) field(hash, `continuation:${c.param}`, c.value);
  return hash.digest("hex");
}

/**
 * The line Claude Code puts first in its system prompt, `x-anthropic-billing-header: cc_version=…;
 * cc_entrypoint=…;`, which Anthropic's API reads as a header rather than as prompt. When Claude
 * Code takes its base URL for Anthropic's own, the line also carries `cch=`, a digest of the
 * request's body, and per-prompt ids: its non-streamed re-send of a turn (`stream: false`) has
 * another `cch=` than the streamed send it repeats (seen with Claude Code 2.1.332), so the line
 * would make one turn two. It says nothing of the conversation.
 */
const BILLING_LINE = /^x-anthropic-billing-header:[^\n]*(\n|$)/gm;

/** A non-text part as fields; text and reasoning are handled by the caller. */
function addPart(hash: Hash, part: IrPart): void {
  switch (part.type) {
    case "tool_call":
      field(hash, "tool_call", part.name);
      field(hash, "arguments", canonicalJson(part.arguments));
      return;
    case "tool_result":
      field(hash, part.isError ? "tool_error" : "tool_result", part.content);
      return;
    case "refusal":
      field(hash, "refusal", part.text);
      return;
    case "image":
      field(hash, "image", part.mediaType);
      field(hash, "bytes", part.data);
      return;
    case "image_url":
      field(hash, "image_url", part.url);
      return;
  }
}

/**
 * A tag and a length before every value, so no two different conversations run together into
 * the same bytes (the text "ab" is not the texts "a" and "b").
 */
function field(hash: Hash, tag: string, value: string): void {
  hash.update(`\u0000${tag}\u0000${value.length}\u0000`);
  hash.update(value);
}

/** Arguments as JSON with sorted keys; text that is not JSON stays as it is. */
function canonicalJson(text: string): string {
  let parsed: unknown;
  try {
    parsed = guardedParse(text, { what: "tool call arguments", param: "arguments" });
  } catch {
    return text;
  }
  return JSON.stringify(sortedKeys(parsed));
}

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== "object") return value;
  const entries = Object.entries(value as Record<string, unknown>);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries.map(([k, v]) => [k, sortedKeys(v)]));
}
