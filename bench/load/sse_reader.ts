import { wallMs } from "./job.ts";

/** What a bench client cares about in a Chat Completions stream. */
export type SseItem =
  | { kind: "keepalive" }
  /** A delta whose content is the fake's send time (wall ms), see fake_upstream.ts. */
  | { kind: "content"; sentAt: number }
  | { kind: "finish" }
  | { kind: "done" }
  | { kind: "other"; text: string };

function readBlock(block: string): SseItem {
  if (block.startsWith(":")) return { kind: "keepalive" };
  const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim())
    .join("\n");
  if (data === "[DONE]") return { kind: "done" };
  try {
    const chunk = JSON.parse(data) as {
      choices?: Array<{ delta?: { content?: string }; finish_reason?: string | null }>;
    };
    const choice = chunk.choices?.[0];
    const content = choice?.delta?.content;
    if (typeof content === "string" && content !== "") {
      return { kind: "content", sentAt: Number(content) };
    }
    if (choice?.finish_reason) return { kind: "finish" };
  } catch { /* reported below as it came */ }
  return { kind: "other", text: block.slice(0, 200) };
}

/**
 * Reads an SSE body to its end, calling `onItem` for every block with the wall time its bytes
 * arrived (blocks that came in one read share that time: the client could not see them apart).
 */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  onItem: (item: SseItem, at: number) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of body) {
    const at = wallMs();
    buffer += decoder.decode(bytes, { stream: true }).replaceAll("\r\n", "\n");
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.trim() !== "") onItem(readBlock(block), at);
    }
  }
}
