/** What the headers of one event-stream message say it is. */
export interface BedrockMessageKind {
  /** `:message-type`: event, exception or error. */
  messageType: string;
  /** `:event-type` of an event message. */
  eventType?: string;
}

/**
 * docs/design.md "Pulse" for Bedrock: only `messageStart` (the role, before anything is said)
 * is a keep-alive. Content blocks and their starts and stops, the stop reason,
 * closing usage and exceptions are content, and so is anything unrecognised,
 * so an unknown event never times out.
 */
export function bedrockMessageIsContent(kind: BedrockMessageKind): boolean {
  return !(kind.messageType === "event" && kind.eventType === "messageStart");
}
