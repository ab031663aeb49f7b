import { isRecord } from "../../runtime/json.ts";
import { field, hasSubstance } from "./fields.ts";

/** Top-level fields of a GenerateContentResponse that say nothing on their own. */
const bookkeeping = new Set([
  "candidates",
  "usageMetadata",
  "usage_metadata",
  "modelVersion",
  "model_version",
  "responseId",
  "response_id",
  "promptFeedback",
  "prompt_feedback",
  "modelStatus",
  "model_status",
  "createTime",
  "create_time",
  "sdkHttpResponse",
]);

/**
 * docs/design.md "Pulse" for Gemini: a chunk is content when a candidate carries parts or a
 * finish reason, when it reports an error or a blocked prompt, or when it is
 * the closing usage report (usage and no candidates). Chunks with no parts and
 * no finish reason are keep-alives; a shape we cannot read counts as content.
 */
export function geminiChunkIsContent(chunk: unknown): boolean {
  if (!isRecord(chunk)) return true;
  if (chunk.error !== undefined) return true;
  const feedback = field(chunk, "promptFeedback");
  if (isRecord(feedback) && hasSubstance(field(feedback, "blockReason"))) return true;
  const candidates = chunk.candidates;
  if (candidates !== undefined && candidates !== null && !Array.isArray(candidates)) return true;
  const list = Array.isArray(candidates) ? candidates : [];
  if (list.some(candidateIsContent)) return true;
  if (list.length === 0 && isRecord(field(chunk, "usageMetadata"))) return true;
  return Object.entries(chunk).some(([key, value]) => !bookkeeping.has(key) && hasSubstance(value));
}

export function finishReasonOf(candidate: Record<string, unknown>): string | undefined {
  const reason = field(candidate, "finishReason");
  return typeof reason === "string" && reason !== "" && reason !== "FINISH_REASON_UNSPECIFIED"
    ? reason
    : undefined;
}

function candidateIsContent(candidate: unknown): boolean {
  if (!isRecord(candidate)) return true;
  if (finishReasonOf(candidate) !== undefined) return true;
  const content = candidate.content;
  if (content === undefined || content === null) return false;
  if (!isRecord(content)) return true;
  const parts = content.parts;
  if (parts === undefined || parts === null) return false;
  if (!Array.isArray(parts)) return true;
  // `{text: ""}` alone is padding; anything else in a part (a signature included) is content.
  return parts.some((part) => !isRecord(part) || Object.values(part).some(hasSubstance));
}
