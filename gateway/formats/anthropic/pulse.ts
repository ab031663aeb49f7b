import { isRecord } from "../../runtime/json.ts";

/**
 * docs/design.md "Pulse" for Anthropic Messages: `message_start` (an empty message shell the
 * API sends before the model has produced anything) and `ping` are
 * keep-alives. Blocks, deltas, `message_delta`, `message_stop` and `error`
 * are content, and so is any event we do not know, so a new event type can
 * never make a live stream look idle.
 */
const keepAliveTypes = new Set(["message_start", "ping"]);

/** The event's type: the JSON `type` field, else the SSE `event:` name (they always match upstream). */
export function anthropicEventType(name: string | undefined, data: unknown): string | undefined {
  return isRecord(data) && typeof data.type === "string" ? data.type : name;
}

export function anthropicEventIsContent(name: string | undefined, data: unknown): boolean {
  const type = anthropicEventType(name, data);
  return type === undefined || !keepAliveTypes.has(type);
}
