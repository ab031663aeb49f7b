import { isRecord } from "../formats/json.ts";

/**
 * Fields whose string value is never prose the model reads: ids, enum words,
 * media types, opaque signatures. Everything else in the body is checked, keys
 * of a JSON schema's `properties` included (the model reads those too).
 */
const NOT_TEXT = new Set([
  "id",
  "tool_use_id",
  "tool_call_id",
  "call_id",
  "file_id",
  "previous_response_id",
  "signature",
  "thought_signature",
  "thoughtSignature",
  "encrypted_content",
  "type",
  "role",
  "model",
  "media_type",
  "mime_type",
  "mimeType",
]);

/** Fields that may carry file bytes: base64, or a `data:` URL. */
const FILE_BYTES = new Set(["data", "file_data", "url", "image_url", "fileUri"]);

const TEXT_MEDIA =
  /^(text\/|application\/(json|xml|x-yaml|yaml|javascript|x-ndjson)\b|[^;]*\+(json|xml)\b)/i;
const BASE64 = /^[A-Za-z0-9+/\r\n]+={0,2}$/;
const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*),/i;

/**
 * Every string of the request body an upstream will see, as one text for the
 * guardrail rules: same-format pass-through forwards the body as the client
 * sent it, so a rule that read only the translated messages would miss
 * documents, search results, file parts and tool descriptions. Files in a
 * text media type are decoded and checked; other file bytes (images, PDF,
 * audio) are not (docs/security.md, "Guardrails are bounded").
 */
export function guardedText(body: unknown): string {
  const parts: string[] = [];
  // Iterative: a body nested deeper than the call stack must not crash the check.
  const stack: Array<{ value: unknown; key: string; parent: Record<string, unknown> | null }> = [
    { value: body, key: "", parent: null },
  ];
  while (stack.length) {
    const { value, key, parent } = stack.pop()!;
    if (typeof value === "string") {
      const text = readable(value, { key, parent });
      if (text) parts.push(text);
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], key, parent });
    } else if (isRecord(value)) {
      const entries = Object.entries(value);
      if (key === "properties") parts.push(...entries.map(([k]) => k));
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, v] = entries[i]!;
        stack.push({ value: v, key: k, parent: value });
      }
    }
  }
  return parts.join("\n");
}

function readable(
  value: string,
  at: { key: string; parent: Record<string, unknown> | null },
): string | null {
  if (NOT_TEXT.has(at.key)) return null;
  if (!FILE_BYTES.has(at.key)) return value;
  const url = DATA_URL.exec(value);
  if (url) {
    const base64 = /;base64$/i.test(url[2] ?? "");
    const payload = value.slice(url[0].length);
    if (!TEXT_MEDIA.test(url[1] ?? "")) return null;
    return base64 ? decodeBase64(payload) : safeDecodeUri(payload);
  }
  if (at.key !== "data" && at.key !== "file_data") return value; // a plain URL
  const media = at.parent?.media_type ?? at.parent?.mime_type ?? at.parent?.mimeType;
  // Anthropic's `{"type": "text", "media_type": "text/plain", "data": "..."}` holds plain text.
  if (at.parent?.type === "text") return value;
  if (typeof media === "string") return TEXT_MEDIA.test(media) ? decodeBase64(value) : null;
  // No media type (audio has a `format`): bytes are skipped, anything else is read as text.
  return BASE64.test(value) ? null : value;
}

function decodeBase64(payload: string): string | null {
  try {
    const bytes = Uint8Array.from(atob(payload.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
    return new TextDecoder().decode(bytes);
  } catch {
    return null; // not base64: the upstream refuses it, nothing a model reads
  }
}

function safeDecodeUri(payload: string): string {
  try {
    return decodeURIComponent(payload);
  } catch {
    return payload;
  }
}
