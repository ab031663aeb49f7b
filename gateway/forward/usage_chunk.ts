import type { UpstreamFrame } from "../formats/format.ts";
import type { IrEvent } from "../formats/ir.ts";
import { isRecord, parseJson } from "../runtime/json.ts";
import { chatAskedUsage } from "../formats/openai_chat/usage_options.ts";
import type { ForwardRequest } from "./hop.ts";

/**
 * docs/observability.md "Token usage": every Chat stream the gateway sends asks its upstream for
 * usage, so each attempt's row has it. A Chat client that did not ask for it must not get the
 * usage-only chunk it never asked for: its stream stays what OpenAI would have sent it.
 */
export function hidesUsage(req: Pick<ForwardRequest, "codec" | "body">): boolean {
  return req.codec.format === "openai-chat" && !chatAskedUsage(req.body);
}

/** The events to encode for the client: usage left out where it is hidden. */
export function withoutUsage(events: IrEvent[], hide: boolean): IrEvent[] {
  return hide && events.some((e) => e.type === "usage")
    ? events.filter((e) => e.type !== "usage")
    : events;
}

const decoder = new TextDecoder();

/**
 * Whether a passed-through Chat frame is the usage-only chunk (`choices: []` and `usage`), the one
 * chunk dropped for a client that did not ask; every other frame passes byte for byte.
 */
export function isUsageOnlyChunk(frame: UpstreamFrame): boolean {
  if (!frame.usage || frame.events.some((e) => e.type !== "usage")) return false;
  const data = decoder.decode(frame.raw).split(/\r\n|\r|\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).trimStart())
    .join("\n");
  const chunk = parseJson(data);
  return isRecord(chunk) && Array.isArray(chunk.choices) && chunk.choices.length === 0;
}
