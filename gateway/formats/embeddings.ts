/**
 * Embeddings: a kind of call beside generation (docs/providers.md "Embeddings"). A client's
 * request is parsed into one neutral `EmbedRequest`; each upstream kind that can embed has an
 * `EmbedUpstream` (its request body, URL and answer), each client format an `EmbedClient`
 * (its body in, its answer out). The candidate loop, hops, slots, cooldown and history are
 * the generation path's own (gateway/forward/embed_forward.ts).
 */
import type { ClientCodec, ClientRequestContext, UpstreamCall } from "./format.ts";
import type { UpstreamPost } from "./client_headers.ts";
import type { Upstream } from "../config/schema.ts";
import { clientError } from "../runtime/gateway_error.ts";
import { badResponse } from "./upstream_error.ts";
import { isRecord } from "../runtime/json.ts";
import { UPSTREAM_CAPS } from "./upstream_caps.ts";

/**
 * The bounds of one embeddings request (docs/security.md "Hostile input"). Inputs: OpenAI's own
 * cap per request. Characters: above what OpenAI's 300,000-token cap allows in English, so no
 * request an upstream takes is refused here first. Token ids: OpenAI's cap. Dimensions: twice
 * the largest model in use (3,072 at OpenAI and Google, 4,096 for the largest open models).
 * Values: inputs × vector length, asked for or answered: OpenAI's largest request (2,048 inputs)
 * at the longest vector OpenAI's and Google's models answer (3,072), so no request those
 * providers take is refused; 24 MiB as float32. A request that asks more (1,000 inputs at
 * 8,192) is refused before any upstream is called, an answer that holds more is a bad answer.
 * Calls: the most upstream calls one hop makes for a provider that embeds few texts per call
 * (Titan: one).
 */
export const EMBED_LIMITS = {
  inputs: 2048,
  chars: 2_000_000,
  tokenIds: 300_000,
  dimensions: 8192,
  values: 2048 * 3072,
  callsPerHop: 128,
} as const;

/** One text to embed, or (OpenAI only) the token ids of one. */
export interface EmbedInput {
  text?: string;
  tokens?: number[];
  /** A Gemini client's text parts, as sent (a Gemini upstream gets them as they are). */
  parts?: string[];
  /** Gemini's `taskType` word (RETRIEVAL_QUERY, ...), the one vocabulary of intent carried. */
  taskType?: string;
  /** Gemini's `title` of a RETRIEVAL_DOCUMENT. */
  title?: string;
}

export interface EmbedRequest {
  /** The route. */
  model: string;
  inputs: EmbedInput[];
  /** Length of each vector asked for (OpenAI `dimensions`, Gemini `outputDimensionality`). */
  dimensions?: number;
  /** How the client wants the vectors written (OpenAI `encoding_format`; Gemini: floats). */
  encoding: "float" | "base64";
  /** OpenAI's `user`: the session hint. */
  user?: string;
  /** An OpenAI client's fields the gateway does not read, sent on to an OpenAI-kind upstream. */
  extra?: Record<string, unknown>;
  /** Characters of text in all inputs, and token ids in all token inputs. */
  chars: number;
  tokenIds: number;
}

/** What one upstream call answered: a vector per input it was sent, in order. */
export interface EmbedPiece {
  vectors: Float32Array[];
  /** The input tokens the upstream reported for this call, if it did. */
  inputTokens?: number;
  /** The model the upstream says answered. */
  model?: string;
}

/** A whole answer: every input's vector, and the tokens billed. */
export interface EmbedAnswer {
  vectors: Float32Array[];
  model: string;
  inputTokens: number;
  /** Some of `inputTokens` is the gateway's estimate (docs/observability.md "Token usage"). */
  estimated: boolean;
}

/** One upstream call of a hop: the inputs of one batch, for one candidate. */
export interface EmbedCall extends Omit<UpstreamCall, "ir" | "passthrough" | "forwarded"> {
  req: EmbedRequest;
  inputs: EmbedInput[];
}

/** Where a candidate sends: its upstream and the model name it gives. */
export interface EmbedTarget {
  upstream: Upstream;
  model: string;
}

/** What reading one call's answer needs to know. */
export interface EmbedDecode {
  count: number;
  headers: Headers;
  /** The upstream's id, for the errors. */
  upstream: string;
  /** The model the call named. */
  model: string;
}

/** How one upstream kind embeds. */
export interface EmbedUpstream {
  /** What of the request this candidate cannot do, one description each; empty when it can. */
  unsupported(req: EmbedRequest, target: EmbedTarget): string[];
  /**
   * Inputs per call: the provider's batch limit, and what keeps an answer under the cap
   * (`seen`: the vector length an earlier call of the hop answered).
   */
  batchSize(req: EmbedRequest, opts: { model: string; seen?: number }): number;
  build(call: EmbedCall): Promise<UpstreamPost | Request>;
  /**
   * Reads a 200 answer to a call of `count` inputs, as the answer's reader made it (arrays of
   * numbers as Float32Arrays: gateway/formats/vector_json.ts); throws `gw.upstream.bad_response`.
   */
  decode(answer: unknown, opts: EmbedDecode): EmbedPiece;
  /**
   * An object member of the answer as it is read, replaced by what to keep of it: a vector in
   * base64 is decoded there, so no call's answer is ever held as text.
   */
  revive?(key: string, value: unknown, opts: { upstream: string }): unknown;
}

/** How one client format asks for embeddings and reads them. */
export interface EmbedClient {
  /** What the request's row records as its client format. */
  format: string;
  /** The client format's codec: its errors are rendered by it. */
  codec: ClientCodec;
  parse(body: Record<string, unknown>, ctx: ClientRequestContext): EmbedRequest;
  /** The answer's body, written a few vectors at a time as the client reads it. */
  encode(answer: EmbedAnswer, req: EmbedRequest): ReadableStream<Uint8Array>;
}

/**
 * Checks the bounds every client format shares and counts what the inputs hold. Each input must
 * say something: an empty text or token list is refused by every provider, so it is refused here
 * before any is called.
 */
export function boundedInputs(
  inputs: EmbedInput[],
  opts: { param: string },
): { chars: number; tokenIds: number } {
  if (inputs.length === 0) {
    throw clientError(`'${opts.param}' must hold at least one input`, { param: opts.param });
  }
  if (inputs.length > EMBED_LIMITS.inputs) {
    throw clientError(
      `'${opts.param}' holds ${inputs.length} inputs; at most ${EMBED_LIMITS.inputs} per request`,
      { param: opts.param },
    );
  }
  let chars = 0;
  let tokenIds = 0;
  inputs.forEach((input, i) => {
    const size = input.tokens?.length ?? input.text?.length ?? 0;
    if (size === 0) {
      throw clientError(`'${opts.param}' input ${i} is empty`, { param: opts.param });
    }
    if (input.tokens) tokenIds += size;
    else chars += size + (input.title?.length ?? 0);
  });
  if (chars > EMBED_LIMITS.chars) {
    throw clientError(
      `'${opts.param}' holds ${chars} characters; at most ${EMBED_LIMITS.chars} per request`,
      { param: opts.param },
    );
  }
  if (tokenIds > EMBED_LIMITS.tokenIds) {
    throw clientError(
      `'${opts.param}' holds ${tokenIds} token ids; at most ${EMBED_LIMITS.tokenIds} per request`,
      { param: opts.param },
    );
  }
  return { chars, tokenIds };
}

/**
 * Inputs × the vector length a client asks for, against the cap on values: a request that asks
 * more is refused before any upstream is called. One that asks no length is held to the cap by
 * what comes back (`VectorTally`): the length a model answers is known only once it answers.
 */
export function boundedValues(inputs: number, opts: { dimensions?: number; param: string }): void {
  const { dimensions, param } = opts;
  if (dimensions === undefined || inputs * dimensions <= EMBED_LIMITS.values) return;
  throw clientError(
    `${inputs} inputs of ${dimensions} values are ${inputs * dimensions} values; at most ` +
      `${EMBED_LIMITS.values} per request (2048 inputs of 3072)`,
    { param },
  );
}

/** The most values a request may be answered: its inputs at the length asked, or at the cap's. */
export function valuesAllowed(req: EmbedRequest): number {
  const length = req.dimensions ?? EMBED_LIMITS.dimensions;
  return Math.min(req.inputs.length * length, EMBED_LIMITS.values);
}

/** Characters of an answer around its vectors (the list, the model's name, the usage). */
const ANSWER_ENVELOPE = 4096;
/** Characters of one input's answer besides its values, pretty-printed, generously. */
const ANSWER_ITEM = 256;
/** Characters a text echoed in an answer may take (Cohere's `texts`): `\uXXXX` each. */
const ECHO_PER_CHAR = 6;
/** Titan V2 answers each vector twice, as `embedding` and as `embeddingsByType.float`. */
const VECTOR_COPIES = 2;

/**
 * The bytes one call's answer may take (docs/security.md "Upstream bytes are capped"): its
 * inputs at the length asked or seen (else the longest the gateway takes) in JSON numbers, twice
 * over, and the texts a provider may echo; never more than any whole answer. A hostile answer
 * is cut as soon as it is larger than any answer to the call could be.
 */
export function answerCap(inputs: EmbedInput[], opts: { length: number }): number {
  let echoed = 0;
  for (const input of inputs) echoed += input.text?.length ?? 0;
  const perInput = ANSWER_ITEM + VECTOR_COPIES * opts.length * UPSTREAM_CAPS.embeddingValueBytes;
  const bytes = ANSWER_ENVELOPE + inputs.length * perInput + echoed * ECHO_PER_CHAR;
  return Math.min(UPSTREAM_CAPS.answerBytes, bytes);
}

/**
 * The values besides the vectors one call's answer may hold (members, items, texts echoed): a
 * handful per input in every provider's answer, so an answer of millions of empty arrays is
 * refused as it is read, not built.
 */
export function answerNodes(inputs: number): number {
  return 256 + 16 * inputs;
}

/** A client's vector length: a whole number from 1 to the gateway's cap. */
export function boundedDimensions(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (
    typeof value !== "number" || !Number.isInteger(value) || value < 1 ||
    value > EMBED_LIMITS.dimensions
  ) {
    throw clientError(`'${param}' must be a whole number from 1 to ${EMBED_LIMITS.dimensions}`, {
      param,
    });
  }
  return value;
}

/**
 * The vectors of a whole answer, checked as they arrive: one per input sent, none empty or
 * longer than the cap, all of one length (the one asked for, if any), and no more values for
 * all the request's inputs than the cap (`valuesAllowed`): the first vector of a model whose
 * length would take the request over it ends the hop before its other calls. An answer that
 * breaks any is the upstream's bad answer: before content, so the next candidate is tried.
 */
export class VectorTally {
  readonly vectors: Float32Array[] = [];
  #values = 0;
  #length: number | undefined;
  readonly #inputs: number;
  readonly #allowed: number;

  constructor(req: EmbedRequest) {
    this.#length = req.dimensions;
    this.#inputs = req.inputs.length;
    this.#allowed = valuesAllowed(req);
  }

  /** The values of the vectors read so far, as float32. */
  get bytes(): number {
    return this.#values * 4;
  }

  add(piece: EmbedPiece, opts: { count: number; upstream: string }): void {
    if (piece.vectors.length !== opts.count) {
      throw badResponse(
        `upstream ${opts.upstream} answered ${piece.vectors.length} embeddings for ${opts.count} inputs`,
      );
    }
    for (const vector of piece.vectors) {
      const length = vector.length;
      if (length === 0 || length > EMBED_LIMITS.dimensions) {
        throw badResponse(
          `upstream ${opts.upstream} answered an embedding of ${length} values ` +
            `(at most ${EMBED_LIMITS.dimensions})`,
        );
      }
      if (this.#length !== undefined && length !== this.#length) {
        throw badResponse(
          `upstream ${opts.upstream} answered an embedding of ${length} values, not ${this.#length}`,
        );
      }
      if (this.#length === undefined && this.#inputs * length > this.#allowed) {
        throw badResponse(
          `upstream ${opts.upstream} answered embeddings of ${length} values: ${this.#inputs} ` +
            `inputs would be over the gateway's cap of ${EMBED_LIMITS.values} values`,
        );
      }
      this.#length = length;
      this.#values += length;
      this.vectors.push(vector);
    }
  }
}

/** An upstream's answer as a JSON object, or its bad answer. */
export function answerObject(body: unknown, upstream: string): Record<string, unknown> {
  if (!isRecord(body) || ArrayBuffer.isView(body)) {
    throw badResponse(`upstream ${upstream} answered embeddings that are not an object`);
  }
  return body;
}

/** A token count an upstream reported: a whole number from 0, or none. */
export function reportedTokens(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}
