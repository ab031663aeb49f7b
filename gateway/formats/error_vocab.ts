import type { ClientFormat, UpstreamKind } from "./format.ts";
import type { GatewayCode, GatewayError } from "../runtime/gateway_error.ts";
import { ERROR_CODES } from "../runtime/error_codes.ts";
import { isContextOverflow } from "./context_overflow.ts";

/**
 * The one table between the formats' error vocabularies: what an error
 * means, and how each format says it. Every codec's `renderError` reads its
 * words here, so an upstream's 4xx keeps its meaning in any client format
 * (docs/design.md "Client API") and the gateway's own errors get the same words everywhere.
 */
export type ErrorMeaning =
  | "invalid_request"
  | "context_too_long"
  | "content_policy"
  | "precondition"
  | "authentication"
  | "quota"
  | "permission"
  | "not_found"
  | "conflict"
  | "too_large"
  | "rate_limit"
  | "cancelled"
  | "stopped"
  | "server"
  | "unimplemented"
  | "bad_gateway"
  | "unavailable"
  | "timeout";

/** The error vocabularies: the two OpenAI APIs share theirs. */
export type ErrorVocab = "openai" | "anthropic" | "gemini" | "bedrock";

const VOCAB_OF: Record<UpstreamKind, ErrorVocab> = {
  "openai-chat": "openai",
  "openai-responses": "openai",
  "anthropic": "anthropic",
  "gemini": "gemini",
  "bedrock": "bedrock",
  // Its HTTP errors are Google's google.rpc objects, as generateContent's.
  "gemini-interactions": "gemini",
};

/**
 * How each format says a meaning: OpenAI `type` and `code`, Anthropic
 * `error.type`, the google.rpc status name Gemini puts in `error.status`,
 * and Bedrock's exception name. Where a format has one word for several
 * meanings (Anthropic's `invalid_request_error`), the first row using it is
 * the one it reads back as.
 */
interface Words {
  /**
   * `streamCode`: the `code` of a Responses stream's `response.failed` in place of the gateway's,
   * where a client reads only a provider's code as final. Never read back.
   */
  openai: { type: string; code?: string; streamCode?: string };
  anthropic: string;
  gemini: string;
  bedrock: string;
  /** The status each vocabulary answers with, where it is not the error's own. */
  status?: Record<ErrorVocab, number>;
}

const TABLE: Record<ErrorMeaning, Words> = {
  invalid_request: {
    openai: { type: "invalid_request_error" },
    anthropic: "invalid_request_error",
    gemini: "INVALID_ARGUMENT",
    bedrock: "ValidationException",
  },
  context_too_long: {
    openai: { type: "invalid_request_error", code: "context_length_exceeded" },
    anthropic: "invalid_request_error",
    gemini: "INVALID_ARGUMENT",
    bedrock: "ValidationException",
  },
  content_policy: {
    openai: { type: "invalid_request_error", code: "content_policy_violation" },
    anthropic: "invalid_request_error",
    gemini: "INVALID_ARGUMENT",
    bedrock: "ValidationException",
  },
  precondition: {
    openai: { type: "invalid_request_error" },
    anthropic: "invalid_request_error",
    gemini: "FAILED_PRECONDITION",
    bedrock: "ValidationException",
  },
  authentication: {
    openai: { type: "authentication_error", code: "invalid_api_key" },
    anthropic: "authentication_error",
    gemini: "UNAUTHENTICATED",
    bedrock: "UnrecognizedClientException",
  },
  quota: {
    openai: { type: "insufficient_quota", code: "insufficient_quota" },
    anthropic: "billing_error",
    gemini: "RESOURCE_EXHAUSTED",
    bedrock: "ServiceQuotaExceededException",
  },
  permission: {
    openai: { type: "permission_error" },
    anthropic: "permission_error",
    gemini: "PERMISSION_DENIED",
    bedrock: "AccessDeniedException",
  },
  not_found: {
    openai: { type: "not_found_error" },
    anthropic: "not_found_error",
    gemini: "NOT_FOUND",
    bedrock: "ResourceNotFoundException",
  },
  conflict: {
    openai: { type: "conflict_error" },
    anthropic: "conflict_error",
    gemini: "ALREADY_EXISTS",
    bedrock: "ConflictException",
  },
  too_large: {
    openai: { type: "invalid_request_error" },
    anthropic: "request_too_large",
    gemini: "INVALID_ARGUMENT",
    bedrock: "ValidationException",
  },
  rate_limit: {
    openai: { type: "rate_limit_error", code: "rate_limit_exceeded" },
    anthropic: "rate_limit_error",
    gemini: "RESOURCE_EXHAUSTED",
    bedrock: "ThrottlingException",
  },
  // An abort or a departed caller has no Anthropic type: neither a bad request nor a rate limit.
  cancelled: {
    openai: { type: "request_cancelled" },
    anthropic: "api_error",
    gemini: "CANCELLED",
    bedrock: "InternalServerException",
  },
  /**
   * An operator's stop (an abort, a fence's refusal): in the words and status each coding agent
   * takes as final, found by running them (docs/design.md "Abort and disconnect"). A 499 or a
   * 403 is retried by Codex and a 499 by Gemini CLI, a 400 by Claude Code; Codex ends a stream
   * only on a provider's code (`invalid_prompt`). The error's own status (499) stays its row's.
   */
  stopped: {
    openai: { type: "invalid_request_error", streamCode: "invalid_prompt" },
    anthropic: "invalid_request_error",
    gemini: "INVALID_ARGUMENT",
    bedrock: "ValidationException",
    status: { openai: 400, anthropic: 499, gemini: 400, bedrock: 400 },
  },
  server: {
    openai: { type: "server_error" },
    anthropic: "api_error",
    gemini: "INTERNAL",
    bedrock: "InternalServerException",
  },
  unimplemented: {
    openai: { type: "server_error" },
    anthropic: "api_error",
    gemini: "UNIMPLEMENTED",
    bedrock: "InternalServerException",
  },
  bad_gateway: {
    openai: { type: "server_error" },
    anthropic: "api_error",
    gemini: "UNAVAILABLE",
    bedrock: "InternalServerException",
  },
  unavailable: {
    openai: { type: "service_unavailable" },
    anthropic: "overloaded_error",
    gemini: "UNAVAILABLE",
    bedrock: "ServiceUnavailableException",
  },
  timeout: {
    openai: { type: "timeout_error" },
    anthropic: "timeout_error",
    gemini: "DEADLINE_EXCEEDED",
    bedrock: "ModelTimeoutException",
  },
};

/** The meaning of an HTTP status, for errors that bring no words of their own. */
const BY_STATUS: Record<number, ErrorMeaning> = {
  400: "invalid_request",
  401: "authentication",
  402: "quota",
  403: "permission",
  404: "not_found",
  408: "timeout",
  409: "conflict",
  413: "too_large",
  415: "invalid_request",
  429: "rate_limit",
  499: "cancelled",
  500: "server",
  // A method the path does not take is the caller's mistake, not a server fault.
  405: "invalid_request",
  501: "unimplemented",
  502: "bad_gateway",
  503: "unavailable",
  504: "timeout",
  529: "unavailable",
};

type Reading = ErrorVocab | "openaiCode";

/** Words the table does not render but providers send, and what they mean. */
const ALSO: Record<Reading, Record<string, ErrorMeaning>> = {
  // OpenAI's 429 types.
  openai: { requests: "rate_limit", tokens: "rate_limit" },
  // OpenAI codes, the Responses API's failure codes among them.
  openaiCode: {
    model_not_found: "not_found",
    invalid_prompt: "invalid_request",
    image_content_policy_violation: "content_policy",
    // Azure OpenAI's content filter refusing the prompt (400, innererror
    // ResponsibleAIPolicyViolation): the provider's refusal, the caller's to read.
    content_filter: "content_policy",
    vector_store_timeout: "timeout",
    server_error: "server",
  },
  anthropic: {},
  gemini: {
    OUT_OF_RANGE: "invalid_request",
    ABORTED: "conflict",
    UNKNOWN: "server",
    DATA_LOSS: "server",
  },
  bedrock: {
    ModelNotReadyException: "unavailable",
    ModelErrorException: "server",
    ModelStreamErrorException: "server",
  },
};

/** Each vocabulary's words read back into meanings; OpenAI codes apart from its types. */
const READ = buildReadTables();

function buildReadTables(): Record<Reading, Map<string, ErrorMeaning>> {
  const read: Record<Reading, Map<string, ErrorMeaning>> = {
    openai: new Map<string, ErrorMeaning>(),
    openaiCode: new Map<string, ErrorMeaning>(),
    anthropic: new Map<string, ErrorMeaning>(),
    gemini: new Map<string, ErrorMeaning>(),
    bedrock: new Map<string, ErrorMeaning>(),
  };
  const add = (map: Map<string, ErrorMeaning>, word: string | undefined, meaning: ErrorMeaning) => {
    if (word !== undefined && !map.has(word)) map.set(word, meaning);
  };
  for (const [meaning, words] of Object.entries(TABLE) as [ErrorMeaning, Words][]) {
    add(read.openai, words.openai.type, meaning);
    add(read.openaiCode, words.openai.code, meaning);
    add(read.anthropic, words.anthropic, meaning);
    add(read.gemini, words.gemini, meaning);
    add(read.bedrock, words.bedrock, meaning);
  }
  for (
    const [reading, words] of Object.entries(ALSO) as [Reading, Record<string, ErrorMeaning>][]
  ) {
    for (const [word, meaning] of Object.entries(words)) add(read[reading], word, meaning);
  }
  return read;
}

/** Our own timeouts are timeouts whatever status `timeout_status` gives them (docs/design.md "Client API"). */
const TIMEOUT_CODES = new Set<GatewayCode>([
  "gw.upstream.idle_timeout",
  "gw.upstream.idle_timeout_mid_stream",
  "gw.upstream.first_content_timeout",
  "gw.upstream.deadline",
]);

/**
 * For an upstream's own error passed on to the caller (the "other 4xx" of
 * docs/design.md "Failover before content"), the vocabulary its words are in. The upstream's words for a
 * failure we charge to it (a 401 on our credential, a 429) are not the
 * caller's to read: those speak by our code and status.
 */
function passedOn(err: GatewayError): ErrorVocab | undefined {
  if (err.source !== "client" || err.upstreamKind === undefined) return undefined;
  return VOCAB_OF[err.upstreamKind];
}

/** What an error means: the upstream's words when it is theirs, else our code and its status. */
export function errorMeaning(err: GatewayError): ErrorMeaning {
  if (isOperatorStop(err)) return "stopped";
  const vocab = passedOn(err);
  if (vocab) {
    const meaning = readWords(vocab, { type: err.upstreamType, code: err.upstreamCode }) ??
      statusMeaning(err.status);
    // Only OpenAI has a code for an over-long prompt; the others say it in a message (see
    // context_overflow.ts). An OpenAI client checks `code === "context_length_exceeded"` to
    // shorten its history, so those messages are read as that meaning.
    return meaning === "invalid_request" && isContextOverflow(err) ? "context_too_long" : meaning;
  }
  if (TIMEOUT_CODES.has(err.code)) return "timeout";
  return statusMeaning(err.status);
}

/** An operator's stop: its code's source is `aborted` (gateway/runtime/error_codes.ts). */
export function isOperatorStop(err: GatewayError): boolean {
  return ERROR_CODES[err.code].source === "aborted";
}

/** The status a client of `format` is answered with: the meaning's own there, else the error's. */
export function clientStatus(err: GatewayError, format: ClientFormat): number {
  return TABLE[errorMeaning(err)].status?.[VOCAB_OF[format]] ?? err.status;
}

/** The `code` a Responses stream's `response.failed` carries instead of the gateway's, if any. */
export function responsesStreamCode(err: GatewayError): string | undefined {
  return TABLE[errorMeaning(err)].openai.streamCode;
}

function readWords(
  vocab: ErrorVocab,
  words: { type?: string; code?: string },
): ErrorMeaning | undefined {
  const byCode = vocab === "openai" && words.code ? READ.openaiCode.get(words.code) : undefined;
  return byCode ?? (words.type ? READ[vocab].get(words.type) : undefined);
}

function statusMeaning(status: number): ErrorMeaning {
  // An unlisted 4xx is a request the server will not take as it stands.
  return BY_STATUS[status] ?? (status >= 500 ? "server" : "precondition");
}

/**
 * OpenAI's `type` and `code` for an error. An upstream of the OpenAI family
 * keeps its own words; otherwise they come from the table. Where there is no
 * provider code, `code` is the gateway's code (docs/design.md "Client API").
 */
export function openAiWords(err: GatewayError): { type: string; code: string } {
  const words = TABLE[errorMeaning(err)].openai;
  const vocab = passedOn(err);
  if (!vocab) return { type: words.type, code: err.code };
  const own = vocab === "openai";
  return {
    type: (own ? err.upstreamType : undefined) ?? words.type,
    code: (own ? err.upstreamCode : undefined) ?? words.code ?? err.code,
  };
}

/** Anthropic's `error.type` for an error: an Anthropic upstream's own, else the table's. */
export function anthropicType(err: GatewayError): string {
  return ownWord(err, "anthropic") ?? TABLE[errorMeaning(err)].anthropic;
}

/** The google.rpc status name for an error: a Gemini upstream's own, else the table's. */
export function geminiStatusName(err: GatewayError): string {
  return ownWord(err, "gemini") ?? TABLE[errorMeaning(err)].gemini;
}

function ownWord(err: GatewayError, vocab: ErrorVocab): string | undefined {
  return passedOn(err) === vocab ? err.upstreamType : undefined;
}

/**
 * The provider's words when they were translated into another vocabulary,
 * for formats with a free-form detail field (Anthropic `details`, Gemini
 * ErrorInfo metadata), so nothing the provider said is lost.
 */
export function translatedWords(
  err: GatewayError,
  vocab: ErrorVocab,
): { upstream_type?: string; upstream_code?: string } {
  const said = passedOn(err);
  if (!said || said === vocab) return {};
  const out: { upstream_type?: string; upstream_code?: string } = {};
  if (err.upstreamType !== undefined) out.upstream_type = err.upstreamType;
  if (err.upstreamCode !== undefined) out.upstream_code = err.upstreamCode;
  return out;
}

/** The upstream's answer, unchanged, when the client speaks its format (docs/design.md "Client API"). */
export function sameFormatAnswer(
  err: GatewayError,
  format: ClientFormat,
): GatewayError["upstreamAnswer"] {
  return passedOn(err) && err.upstreamKind === format ? err.upstreamAnswer : undefined;
}
