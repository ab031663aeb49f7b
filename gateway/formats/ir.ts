/**
 * The gateway's own picture of a request and of an answer. Every wire format
 * parses into it and serialises out of it, so n formats need 2n modules, not n².
 */

/**
 * A prompt-cache breakpoint (Anthropic's `cache_control`, Bedrock's `cachePoint`): the prompt up
 * to and including the marked block may be cached, for 5 minutes unless `ttl` says an hour. Kept
 * in the IR so a translated or resumed request keeps its caching (docs/observability.md "Where
 * the cache is carried"); kinds that cache on their own (OpenAI, Gemini) leave it out.
 */
export interface IrCacheMark {
  ttl?: "5m" | "1h";
}

export interface IrTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
  cache?: IrCacheMark;
}

/** One block of the system prompt, kept as a block when the client marked any for caching. */
export interface IrSystemBlock {
  text: string;
  cache?: IrCacheMark;
}

/**
 * Extended thinking as Anthropic asks for it (`thinking`), which Claude on Bedrock takes in the
 * same words; other kinds have their own knobs and are not sent it.
 */
export type IrThinking =
  | { type: "enabled"; budgetTokens: number }
  | { type: "adaptive" }
  | { type: "disabled" };

export type IrToolChoice = "auto" | "none" | "required" | { name: string };

export type IrPart =
  & (
    | { type: "text"; text: string }
    | { type: "image"; mediaType: string; data: string } // base64
    | { type: "image_url"; url: string }
    | { type: "reasoning"; text: string; signature?: string }
    | { type: "refusal"; text: string }
    | { type: "tool_call"; id: string; name: string; arguments: string } // arguments: JSON text
    | { type: "tool_result"; toolCallId: string; name?: string; content: string; isError?: boolean }
  )
  & { cache?: IrCacheMark };

/**
 * A turn. `system` is an instruction given mid-conversation (after the first
 * user or assistant turn): a leading one is `IrRequest.system`. Its content is
 * text only. Targets without such a role fold it into a user turn
 * (`foldSystemTurns` in gateway/formats/system_turns.ts).
 */
export interface IrMessage {
  role: "user" | "assistant" | "system";
  content: IrPart[];
}

/**
 * A tool the provider runs itself. Each upstream kind maps the ones it has an
 * equivalent for (gateway/formats/builtin_tools.ts); a kind without one is skipped
 * unless the route sets `drop_unsupported_tools`.
 */
export interface IrBuiltinTool {
  type: "web_search";
  /** Where it sits in the client's body, for error messages. */
  param: string;
}

/**
 * How the client declared a tool whose upstream name (`IrTool.name`) or call
 * shape differs from its own: a tool inside a Responses namespace, a
 * free-form (custom) tool, a client-run tool search. Answers report calls of
 * that tool back in this shape.
 */
export interface IrClientTool {
  /** The tool's own name inside its namespace. */
  name: string;
  namespace?: string;
  /**
   * `custom`: a free-form tool, sent upstream as a function with one string
   * argument `input`. `tool_search`: Responses' client-run tool search.
   */
  shape?: "custom" | "tool_search";
}

/** Upstream tool name → how the client knows that tool. */
export type IrClientTools = Record<string, IrClientTool>;

/**
 * Structured output. Formats that name the format (OpenAI) carry the name;
 * the others get `DEFAULT_RESPONSE_FORMAT_NAME`.
 */
export type IrResponseFormat =
  | { type: "json_object" }
  | {
    type: "json_schema";
    name: string;
    description?: string;
    schema: Record<string, unknown>;
    strict?: boolean;
  };

/** The name given to a JSON schema whose client format has no name for it (Anthropic, Gemini). */
export const DEFAULT_RESPONSE_FORMAT_NAME = "response";

/**
 * Something the client asked for that the IR has no slot for (an Anthropic
 * document, a Gemini server tool, ...). It is not in the IR's messages or
 * tools, so only an upstream of the client's own format, which is sent the
 * client's body unchanged, can honour it; the engine skips every other.
 */
export interface IrNativeFeature {
  /** Where it sits in the client's body, e.g. `messages[0].content[1].type`. */
  param: string;
  /** What it is, for the error the client reads, e.g. "a 'document' content block". */
  what: string;
}

export interface IrRequest {
  /** The model name the client asked for: the route. */
  model: string;
  system?: string;
  /**
   * The system prompt as the client's blocks, present only when it marked one for caching;
   * their texts joined with "\n" are `system` (or its start, when system messages followed).
   */
  systemBlocks?: IrSystemBlock[];
  /** A cache breakpoint on the request as a whole (Anthropic's top-level `cache_control`). */
  cache?: IrCacheMark;
  thinking?: IrThinking;
  messages: IrMessage[];
  tools?: IrTool[];
  toolChoice?: IrToolChoice;
  /** Provider-run tools (web search), mapped per upstream kind. */
  builtinTools?: IrBuiltinTool[];
  /** Client names of tools flattened or reshaped for translation; absent when none were. */
  clientTools?: IrClientTools;
  /** false: at most one tool call per turn (OpenAI `parallel_tool_calls`, Anthropic `disable_parallel_tool_use`). */
  parallelToolCalls?: boolean;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
  stream: boolean;
  responseFormat?: IrResponseFormat;
  /** The client's own session field (OpenAI `user`, Anthropic `metadata.user_id`). */
  sessionHint?: string;
  /** Features only a same-format upstream can take; absent or empty when any upstream can. */
  nativeOnly?: IrNativeFeature[];
  /**
   * State the provider keeps between turns (Gemini Interactions): the stored
   * conversation this request continues, which only the upstream that stored
   * it holds, and whether the client asked for this exchange to be kept
   * (docs/interactions.md "Stored interactions").
   */
  providerState?: IrProviderState;
  /**
   * The provider's handles of kept state this request names to continue it: a previous
   * response, a conversation, a stored item, a continuation token. Under gateway keys each must
   * have been handed to the caller's key (docs/design.md "Continuation ids").
   */
  continuations?: IrContinuation[];
  /**
   * Whether the handles its answer carries can be named by a later request, so are bound to
   * the caller's key as they pass: the provider keeps what they name (a Responses answer unless
   * `store` is false; an Interactions continuation token, stored or not).
   */
  answerContinues?: boolean;
}

/** A handle of provider-kept state a request names (`IrRequest.continuations`). */
export interface IrContinuation {
  /** Where it sits in the client's body, e.g. `previous_response_id`, `input[2].id`. */
  param: string;
  value: string;
}

export interface IrProviderState {
  /** The provider's id of the stored exchange this one continues (`previous_interaction_id`). */
  continues?: string;
  /** The client asked the provider to store this exchange (`store`, on unless set false). */
  stores: boolean;
}

export type IrFinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "error";

/**
 * What an answer billed, in one vocabulary for every kind (docs/observability.md "Cache
 * tokens"): `inputTokens` is the whole prompt, as OpenAI and Gemini count it; the cache reads
 * and writes are parts of it, never added to it. Anthropic and Bedrock report their cache
 * reads and writes beside their input count, so their decoders add them in.
 */
export interface IrUsage {
  /** Every input token: uncached, read from the cache and written to it. */
  inputTokens?: number;
  outputTokens?: number;
  /** Input tokens read from the provider's prompt cache (part of `inputTokens`). */
  cachedTokens?: number;
  /** Input tokens written to the provider's prompt cache, every lifetime (part of `inputTokens`). */
  cacheWriteTokens?: number;
  /** Of `cacheWriteTokens`, those written for one hour (Anthropic and Bedrock `ttl: "1h"`). */
  cacheWrite1hTokens?: number;
  reasoningTokens?: number;
}

export interface IrResponse {
  id: string;
  model: string;
  content: IrPart[];
  finish: IrFinishReason;
  usage: IrUsage;
  /**
   * Handles the answer hands back that a later request may name to continue it (its stored
   * id and items, a conversation, a continuation token); absent where the format has none.
   */
  continuations?: string[];
}

/** One step of a streamed answer. */
export type IrEvent =
  | { type: "start"; id: string; model: string }
  | { type: "text"; text: string }
  /** `signature` (with empty text) closes a thinking block, as Anthropic's signature_delta does. */
  | { type: "reasoning"; text: string; signature?: string }
  | { type: "tool_call_start"; index: number; id: string; name: string }
  | { type: "tool_call_args"; index: number; args: string }
  | { type: "refusal"; text: string }
  | { type: "finish"; reason: IrFinishReason }
  | { type: "usage"; usage: IrUsage };

export function mergeUsage(into: IrUsage, from: IrUsage): IrUsage {
  return {
    inputTokens: from.inputTokens ?? into.inputTokens,
    outputTokens: from.outputTokens ?? into.outputTokens,
    cachedTokens: from.cachedTokens ?? into.cachedTokens,
    reasoningTokens: from.reasoningTokens ?? into.reasoningTokens,
    ...cacheWrites(from.cacheWriteTokens ?? into.cacheWriteTokens, {
      oneHour: from.cacheWrite1hTokens ?? into.cacheWrite1hTokens,
    }),
  };
}

/**
 * The cache-write fields of a usage, present only when known: most answers write nothing to a
 * cache, and their usage keeps the four fields it always had.
 */
export function cacheWrites(
  tokens: number | undefined,
  opts: { oneHour?: number } = {},
): Pick<IrUsage, "cacheWriteTokens" | "cacheWrite1hTokens"> {
  const out: Pick<IrUsage, "cacheWriteTokens" | "cacheWrite1hTokens"> = {};
  if (tokens !== undefined) out.cacheWriteTokens = tokens;
  if (opts.oneHour !== undefined) out.cacheWrite1hTokens = opts.oneHour;
  return out;
}
