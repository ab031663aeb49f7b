import type { ClientFormat } from "../formats/format.ts";
import { isRecord, parseJson } from "../formats/json.ts";

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
};

/**
 * The session a request names in its headers, or null. Body fields
 * (`IrRequest.sessionHint`) come after it: a header names the session
 * itself, a body field may only approximate one.
 */
export function headerSession(format: ClientFormat, headers: Headers): string | null {
  for (const name of SESSION_HEADERS[format]) {
    const value = headers.get(name)?.trim();
    if (value) return value;
  }
  return null;
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
  const parsed = parseJson(userId);
  if (!isRecord(parsed)) return userId;
  const session = parsed.session_id;
  return typeof session === "string" && session !== "" ? session : undefined;
}
