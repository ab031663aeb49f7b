import { isRecord } from "../runtime/json.ts";

/**
 * Fields whose string value is not text a model reads: enum words the
 * upstream checks against its own list (`type`, `role`, media types), the
 * model (replaced by the route's), references to the provider's own stored
 * objects (`file_id`, `previous_response_id`, `previous_interaction_id`,
 * `continuation_token`: the provider looks them up and refuses one it did not
 * issue), and opaque blobs the provider signed or
 * encrypted itself. Ids a client writes (`id`, `call_id`, `tool_use_id`,
 * `tool_call_id`) are read: they are free text in a conversation's history,
 * and a provider may show them to the model (docs/security.md "Guardrails
 * are bounded").
 */
const NOT_TEXT = new Set([
  "file_id",
  "previous_response_id",
  "previous_interaction_id",
  "continuation_token",
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

/**
 * Field names of the wire formats and of JSON Schema: the same words in
 * every request, so reading them as keys would only lengthen the text the
 * rules read. Any other key is read, wherever it is (a tool call's argument
 * names, a schema's property names, a field the gateway does not know); a
 * word missing here is read too, which is the safe side.
 */
const FIELD_NAMES = new Set([
  // Shared and OpenAI
  "model",
  "messages",
  "role",
  "content",
  "type",
  "text",
  "name",
  "id",
  "tools",
  "tool_calls",
  "tool_call_id",
  "function",
  "arguments",
  "description",
  "parameters",
  "strict",
  "image_url",
  "url",
  "detail",
  "file",
  "file_data",
  "filename",
  "file_id",
  "input_audio",
  "data",
  "format",
  "refusal",
  "stream",
  "stream_options",
  "include_usage",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "stop",
  "user",
  "tool_choice",
  "parallel_tool_calls",
  "response_format",
  "json_schema",
  "schema",
  "input",
  "instructions",
  "output",
  "call_id",
  "status",
  "summary",
  "encrypted_content",
  "reasoning",
  "effort",
  "max_output_tokens",
  "input_text",
  "output_text",
  "input_image",
  "input_file",
  "previous_response_id",
  "store",
  "metadata",
  "prompt_cache_key",
  "namespace",
  "execution",
  "annotations",
  "seed",
  // Anthropic
  "system",
  "source",
  "media_type",
  "tool_use_id",
  "is_error",
  "input_schema",
  "thinking",
  "signature",
  "cache_control",
  "citations",
  "title",
  "context",
  "stop_sequences",
  "top_k",
  "user_id",
  "budget_tokens",
  "disable_parallel_tool_use",
  // Gemini
  "contents",
  "parts",
  "systemInstruction",
  "generationConfig",
  "inlineData",
  "fileData",
  "mimeType",
  "fileUri",
  "functionCall",
  "functionResponse",
  "args",
  "response",
  "functionDeclarations",
  "parametersJsonSchema",
  "toolConfig",
  "functionCallingConfig",
  "mode",
  "allowedFunctionNames",
  "thought",
  "thoughtSignature",
  "maxOutputTokens",
  "topP",
  "topK",
  "stopSequences",
  "responseMimeType",
  "responseSchema",
  "responseJsonSchema",
  "candidateCount",
  "thinkingConfig",
  "safetySettings",
  "category",
  "threshold",
  // Gemini Interactions
  "system_instruction",
  "generation_config",
  "previous_interaction_id",
  "continuation_token",
  "response_mime_type",
  "response_modalities",
  "thinking_level",
  "thinking_summaries",
  "allowed_tools",
  "safety_settings",
  "service_tier",
  "background",
  "result",
  "uri",
  // JSON Schema
  "properties",
  "items",
  "required",
  "enum",
  "const",
  "default",
  "additionalProperties",
  "anyOf",
  "oneOf",
  "allOf",
  "not",
  "$schema",
  "$ref",
  "$defs",
  "definitions",
  "minimum",
  "maximum",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "pattern",
  "nullable",
  "examples",
  "propertyOrdering",
]);

/** Fields that may carry file bytes: base64, or a `data:` URL. */
const FILE_BYTES = new Set(["data", "file_data", "url", "image_url", "fileUri"]);

const TEXT_MEDIA =
  /^(text\/|application\/(json|xml|x-yaml|yaml|javascript|x-ndjson)\b|[^;]*\+(json|xml)\b)/i;
/** Either alphabet (`+/` or the URL-safe `-_`), line breaks and padding: file bytes. */
const BASE64 = /^[A-Za-z0-9+/\-_\r\n]+={0,2}$/;
const DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*),/i;

/** What the rules read of a request (docs/security.md "Guardrails are bounded"). */
export interface GuardedText {
  /** Every string the upstream reads as text, joined by newlines. */
  text: string;
  /** The text is longer than the limit asked for: reading stopped there, `text` is not all of it. */
  over: boolean;
  /** A file in a text media type could not be decoded: some text went unread. */
  undecodable: boolean;
}

/** Where the walk is: an array or an object, its entries, and the next one. */
interface Frame {
  value: unknown[] | Record<string, unknown>;
  keys: string[] | null;
  next: number;
  /** The key the container sits under: array items take it as theirs. */
  key: string;
  parent: Record<string, unknown> | null;
}

/**
 * Every string of the request body an upstream will see, as one text for the
 * guardrail rules: same-format pass-through forwards the body as the client
 * sent it, so a rule that read only the translated messages would miss
 * documents, search results, file parts, tool descriptions and the keys of a
 * tool call's arguments. Files in a text media type are decoded and checked
 * (base64 in either alphabet, or a `data:` URL); one that cannot be decoded
 * is reported, not skipped. Other file bytes (images, PDF, audio) are not
 * read. Reading stops once the text passes `limit` characters: a longer
 * request is not matched at all, so reading further is wasted work on the
 * serving thread.
 */
export function guardedText(body: unknown, opts: { limit?: number } = {}): GuardedText {
  const limit = opts.limit ?? Infinity;
  const parts: string[] = [];
  let length = 0;
  let undecodable = false;
  // Adds a text; false once the limit is passed.
  const add = (text: string): boolean => {
    if (text === "") return true;
    length += text.length + (parts.length ? 1 : 0);
    if (length > limit) return false;
    parts.push(text);
    return true;
  };
  const read = (value: string, at: Place): boolean => {
    const text = readable(value, { key: at.key, parent: at.parent, room: limit - length });
    if (text === UNDECODABLE) {
      undecodable = true;
      return true;
    }
    return text === OVER ? false : text === null || add(text);
  };
  const done = (over: boolean): GuardedText => ({
    text: over ? "" : parts.join("\n"),
    over,
    undecodable,
  });
  if (typeof body === "string") return done(!read(body, { key: "", parent: null }));
  // Iterative, one frame per array or object: a body nested deeper than the call stack must not
  // crash the check, and a million small values must not cost an allocation each.
  const stack: Frame[] = [];
  const open = (value: unknown, at: Place) => {
    const { key, parent } = at;
    if (Array.isArray(value)) stack.push({ value, keys: null, next: 0, key, parent });
    else if (isRecord(value)) stack.push({ value, keys: Object.keys(value), next: 0, key, parent });
  };
  open(body, { key: "", parent: null });
  while (stack.length) {
    const frame = stack[stack.length - 1]!;
    const { value, keys } = frame;
    if (keys === null) {
      const items = value as unknown[];
      if (frame.next >= items.length) {
        stack.pop();
        continue;
      }
      const item = items[frame.next++];
      if (typeof item === "string") {
        if (!read(item, frame)) return done(true);
      } else if (typeof item === "object" && item !== null) open(item, frame);
      continue;
    }
    if (frame.next >= keys.length) {
      stack.pop();
      continue;
    }
    const key = keys[frame.next++]!;
    if (!FIELD_NAMES.has(key) && !add(key)) return done(true);
    const record = value as Record<string, unknown>;
    const item = record[key];
    if (typeof item === "string") {
      if (!read(item, { key, parent: record })) return done(true);
    } else if (typeof item === "object" && item !== null) open(item, { key, parent: record });
  }
  return done(false);
}

interface Place {
  key: string;
  parent: Record<string, unknown> | null;
}

/** A file in a text media type that is not valid base64, percent-encoding or UTF-8. */
const UNDECODABLE = Symbol("undecodable");
/** Decoding would pass the limit: not decoded. */
const OVER = Symbol("over");

type Readable = string | null | typeof UNDECODABLE | typeof OVER;

/**
 * The text a string holds for the model: itself, its decoded file, or null
 * where it holds nothing a model reads (an enum word, file bytes in a binary
 * media type).
 */
function readable(value: string, at: Place & { room: number }): Readable {
  if (NOT_TEXT.has(at.key)) return null;
  if (!FILE_BYTES.has(at.key)) return value;
  const url = DATA_URL.exec(value);
  if (url) {
    const payload = value.slice(url[0].length);
    if (!TEXT_MEDIA.test(url[1] ?? "")) return null;
    const params = url[2] ?? "";
    if (/;base64$/i.test(params)) return decodeBase64(payload, { media: params, room: at.room });
    // Percent-encoding: each character of the text takes at most 9 of the payload.
    if (payload.length / 9 > at.room) return OVER;
    try {
      return decodeURIComponent(payload);
    } catch {
      return UNDECODABLE;
    }
  }
  if (at.key !== "data" && at.key !== "file_data") return value; // a plain URL
  const parent = at.parent;
  // Anthropic's `{"type": "text", "media_type": "text/plain", "data": "..."}` holds plain text.
  if (parent?.type === "text") return value;
  const media = parent?.media_type ?? parent?.mime_type ?? parent?.mimeType;
  if (typeof media === "string") {
    return TEXT_MEDIA.test(media) ? decodeBase64(value, { media, room: at.room }) : null;
  }
  // No media type (audio has a `format`): bytes are skipped, anything else is read as text.
  return BASE64.test(value) ? null : value;
}

/**
 * A text file's base64 bytes (either alphabet, or a mix of both, as lenient
 * decoders take them) decoded in the charset its media type names (UTF-8
 * when none); UNDECODABLE where either step fails, OVER where the text would
 * pass the room left.
 */
function decodeBase64(payload: string, opts: { media: string; room: number }): Readable {
  // Three bytes per four characters, and at most three bytes per character of text.
  if (payload.length / 4 > opts.room) return OVER;
  const charset = /;\s*charset=["']?([^;"'\s]+)/i.exec(opts.media)?.[1] ?? "utf-8";
  try {
    const decoder = new TextDecoder(charset, { fatal: true });
    return decoder.decode(base64Bytes(payload));
  } catch {
    return UNDECODABLE;
  }
}

function base64Bytes(payload: string): Uint8Array {
  const url = /[-_]/.test(payload);
  if (url && /[+/]/.test(payload)) {
    return Uint8Array.fromBase64(payload.replace(/-/g, "+").replace(/_/g, "/"));
  }
  return Uint8Array.fromBase64(payload, { alphabet: url ? "base64url" : "base64" });
}
