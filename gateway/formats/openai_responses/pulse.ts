/** Lifecycle events that say the upstream is alive but nothing has been said yet (docs/design.md "Pulse"). */
const KEEP_ALIVE_TYPES = new Set([
  "response.created",
  "response.in_progress",
  "response.queued",
  "keepalive",
  "ping",
  "heartbeat",
]);

/**
 * docs/design.md "Pulse" for the Responses API: an event is content unless it is one of the
 * lifecycle keep-alives or a `codex.*` side channel (rate-limit notes and the
 * like). Anything we do not recognise counts as content, so an unknown event
 * never times a live stream out.
 */
export function responsesEventIsContent(type: string | undefined): boolean {
  if (type === undefined) return true;
  return !KEEP_ALIVE_TYPES.has(type) && !type.startsWith("codex.");
}
