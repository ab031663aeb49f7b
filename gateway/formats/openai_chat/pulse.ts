import { isRecord } from "../../runtime/json.ts";

/**
 * docs/design.md "Pulse" for Chat Completions: a chunk is content when it carries anything a
 * reader would see. Role-only and empty chunks are keep-alives; anything we
 * cannot read counts as content so an unknown shape never times out.
 */
export function chatChunkIsContent(chunk: unknown): boolean {
  if (!isRecord(chunk)) return true;
  if (chunk.error !== undefined || isRecord(chunk.usage)) return true;
  if (!Array.isArray(chunk.choices)) return true;
  return chunk.choices.some((choice) => {
    if (!isRecord(choice)) return true;
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) return true;
    const delta = choice.delta;
    if (delta === undefined || delta === null) return false;
    if (!isRecord(delta)) return true;
    return Object.entries(delta).some(([key, value]) => key !== "role" && hasSubstance(value));
  });
}

function hasSubstance(value: unknown): boolean {
  if (value === null || value === undefined || value === "") return false;
  if (Array.isArray(value)) return value.length > 0;
  return true;
}
