import type { ClientFormat } from "./format.ts";
import type { IrRequest } from "./ir.ts";
import { isRecord } from "../runtime/json.ts";
import { guardedParse } from "./json_guard.ts";
import { GatewayError } from "../runtime/gateway_error.ts";

/**
 * The session headers each kind of client sends, in order of preference after
 * our own `x-session-id`: Claude Code's `x-claude-code-session-id`; Codex's
 * conversation id as `session_id` (older releases) or `session-id`. Gemini CLI
 * and Google's SDK send none, so a Gemini request has a session only when the
 * caller names one (`x-session-id`): no affinity otherwise.
 */
const SESSION_HEADERS: Record<ClientFormat, readonly string[]> = {
  anthropic: ["x-session-id", "x-claude-code-session-id"],
  "openai-chat": ["x-session-id", "session_id", "session-id"],
  "openai-responses": ["x-session-id", "session_id", "session-id"],
  gemini: ["x-session-id"],
  "gemini-interactions": ["x-session-id"],
};

/**
 * The session a request names in its headers, or null. Body fields
 * (`IrRequest.sessionHint`) come after it: a header names the session
 * itself, a body field may only approximate one.
 */
export function headerSession(format: ClientFormat, headers: Headers): string | null {
  const names = SESSION_HEADERS[format];
  // Indexed, not for-of: until the function is optimized a for-of makes an object per step
  // (docs/performance_log.md "A request plan").
  for (let i = 0; i < names.length; i++) {
    const value = headers.get(names[i]!)?.trim();
    if (value) return boundedSession(value);
  }
  return null;
}

/**
 * The session a request names, as generation records it: its headers first
 * (`headerSession`), else a body field (`IrRequest.sessionHint`), bounded.
 */
export function requestSession(
  format: ClientFormat,
  opts: { headers: Headers; hint: string | undefined },
): string | null {
  const named = headerSession(format, opts.headers);
  if (named !== null) return named;
  return opts.hint === undefined ? null : boundedSession(opts.hint);
}

/** A session id follows the request-id rule (docs/design.md, "Abort and disconnect"). */
const SESSION_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A session id as history, affinity and aborts keep it: one that follows the
 * request-id rule as it is; any other (a 5 MB `user` field, spaces, JSON) as
 * a short digest of itself, so the same value still names the same session
 * but never costs more than a few bytes.
 */
export function boundedSession(value: string): string {
  if (SESSION_ID.test(value)) return value;
  // FNV-1a, 32 bits twice (two offsets): affinity needs a stable name, not secrecy.
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ value.length;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193) >>> 0;
    b = Math.imul(b ^ c, 0x01000193 ^ 0x5bd1e995) >>> 0;
  }
  return `h:${a.toString(16).padStart(8, "0")}${b.toString(16).padStart(8, "0")}`;
}

/**
 * Anthropic `metadata.user_id` as a session. Claude Code now sends a JSON
 * string (`{"device_id", "account_uuid", "session_id"}`): its `session_id`
 * is the session; one without names none, since a device or account id would
 * tie every conversation on the machine to one upstream and put the id in
 * history. Any other string is the client's own id and is used as it is.
 */
export function anthropicUserSession(userId: string | undefined): string | undefined {
  if (userId === undefined || userId === "") return undefined;
  if (!userId.trimStart().startsWith("{")) return userId;
  const parsed = userIdJson(userId);
  if (!isRecord(parsed)) return userId;
  const session = parsed.session_id;
  return typeof session === "string" && session !== "" ? session : undefined;
}

/** `metadata.user_id` as JSON, under the guard every client JSON text passes (docs/security.md "Deep JSON"). */
function userIdJson(userId: string): unknown {
  try {
    return guardedParse(userId, { what: "'metadata.user_id'", param: "metadata.user_id" });
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    return undefined; // not JSON: the client's own id
  }
}

/** How much of a prompt the derived session reads: past it, two prompts share a cache anyway. */
const PROMPT_DIGEST_CHARS = 256 * 1024;

/**
 * The session of a request that names none (docs/observability.md "Cache-aware affinity"): a
 * digest of its system prompt and first user turn, which every later turn of the same
 * conversation repeats, so the conversation keeps to the upstream holding its prompt cache.
 * Two conversations that open alike share the name, as they share that cache. `p:` marks it
 * as derived. Null for a lone question (one message, no system prompt: there is no prefix
 * worth a cache, and identical one-line asks must not all stick to one upstream) and for a
 * request with no user turn.
 */
export function promptSession(ir: IrRequest): string | null {
  if (!ir.system && ir.messages.length < 2) return null;
  const first = ir.messages.find((m) => m.role === "user");
  if (!first) return null;
  const digest = new Fnv();
  digest.add(ir.system ?? "");
  for (const part of first.content) {
    digest.add(`\u0000${part.type}\u0000`);
    if (part.type === "text" || part.type === "refusal") digest.add(part.text);
    else if (part.type === "tool_result") digest.add(part.content);
    else if (part.type === "image_url") digest.add(part.url);
    else if (part.type === "image") digest.add(part.data.slice(0, 4096));
  }
  return `p:${digest.hex()}`;
}

/** FNV-1a, 32 bits twice (as `boundedSession`), over at most PROMPT_DIGEST_CHARS characters. */
class Fnv {
  #a = 0x811c9dc5;
  #b = 0x01000193;
  #left = PROMPT_DIGEST_CHARS;

  add(text: string): void {
    const n = Math.min(text.length, this.#left);
    this.#left -= n;
    let a = this.#a;
    let b = this.#b;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193) >>> 0;
      b = Math.imul(b ^ c, 0x01000193 ^ 0x5bd1e995) >>> 0;
    }
    this.#a = a;
    this.#b = b;
  }

  hex(): string {
    return this.#a.toString(16).padStart(8, "0") + this.#b.toString(16).padStart(8, "0");
  }
}
