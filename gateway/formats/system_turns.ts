import type { IrMessage, IrPart } from "./ir.ts";

/** A turn of a target whose conversation has only user and assistant turns. */
export type ConversationTurn = Omit<IrMessage, "role"> & { role: "user" | "assistant" };

/**
 * Anthropic, Gemini and Bedrock have no system role inside the conversation
 * (Chat and Responses do). A system turn given mid-conversation becomes a user
 * turn in place, its text wrapped in `<system>` tags so the model still reads
 * it as an instruction rather than as the user's words; keeping its place
 * keeps what it refers to (the turns before it) and the prompt prefix that
 * providers cache. Builders that merge consecutive same-role turns merge it
 * with its neighbours.
 */
export function foldSystemTurns(messages: IrMessage[]): ConversationTurn[] {
  return messages.map((m): ConversationTurn =>
    m.role === "system"
      ? { role: "user", content: m.content.map(markAsSystem) }
      : { role: m.role, content: m.content }
  );
}

function markAsSystem(part: IrPart): IrPart {
  return part.type === "text" ? { type: "text", text: `<system>\n${part.text}\n</system>` } : part;
}

/** The text of a system turn, as targets with a system role send it. */
export function systemText(message: IrMessage): string {
  return message.content.map((p) => (p.type === "text" ? p.text : "")).join("\n");
}
