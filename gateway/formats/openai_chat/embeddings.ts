/**
 * OpenAI's embeddings API, as a client format (`POST /v1/embeddings`) and as an upstream of the
 * `openai-chat` kind (any OpenAI-compatible server's `/embeddings`, Azure OpenAI's deployment
 * URL): docs/providers.md "Embeddings".
 */
import { boundedModel } from "../bounded_names.ts";
import { jsonPost } from "../format_kit.ts";
import { openAiAuth, openAiUrl } from "../cloud/azure.ts";
import { optionalString, requireString } from "../request_fields.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { isRecord } from "../../runtime/json.ts";
import { badResponse } from "../upstream_error.ts";
import { UPSTREAM_CAPS } from "../upstream_caps.ts";
import {
  answerObject,
  boundedDimensions,
  boundedInputs,
  boundedValues,
  EMBED_LIMITS,
  type EmbedAnswer,
  type EmbedClient,
  type EmbedInput,
  type EmbedRequest,
  type EmbedUpstream,
  reportedTokens,
} from "../embeddings.ts";
import { base64Of, floatsText, vectorBody, vectorOf } from "../embedding_vectors.ts";
import { chatClient } from "./mod.ts";

/** The body fields the gateway reads; any other goes on to an OpenAI-kind upstream as sent. */
const READ_FIELDS = new Set(["model", "input", "encoding_format", "dimensions", "user"]);

const INPUT_SHAPE = "a string, an array of strings, an array of token ids, " +
  "or an array of token-id arrays";

export function parseOpenAiEmbeddings(body: Record<string, unknown>): EmbedRequest {
  const model = boundedModel(requireString(body.model, "model"));
  if (model === "") throw clientError("'model' must not be empty", { param: "model" });
  const inputs = readInput(body.input);
  const counts = boundedInputs(inputs, { param: "input" });
  const encoding = body.encoding_format ?? "float";
  if (encoding !== "float" && encoding !== "base64") {
    throw clientError("'encoding_format' must be 'float' or 'base64'", {
      param: "encoding_format",
    });
  }
  const extra = Object.fromEntries(Object.entries(body).filter(([k]) => !READ_FIELDS.has(k)));
  const dimensions = boundedDimensions(body.dimensions, "dimensions");
  boundedValues(inputs.length, { dimensions, param: "dimensions" });
  return {
    model,
    inputs,
    dimensions,
    encoding,
    user: optionalString(body.user, "user"),
    ...(Object.keys(extra).length ? { extra } : {}),
    ...counts,
  };
}

/** `input`: OpenAI's four shapes, one kind per request. */
function readInput(value: unknown): EmbedInput[] {
  if (typeof value === "string") return [{ text: value }];
  if (!Array.isArray(value) || value.length === 0) {
    throw clientError(`'input' must be ${INPUT_SHAPE}, not empty`, { param: "input" });
  }
  // Counted before anything is read: a hostile array is refused at its length.
  if (value.length > EMBED_LIMITS.inputs && !value.every((v) => typeof v === "number")) {
    throw clientError(
      `'input' holds ${value.length} inputs; at most ${EMBED_LIMITS.inputs} per request`,
      { param: "input" },
    );
  }
  if (value.every((v) => typeof v === "string")) return value.map((text) => ({ text }));
  if (value.every((v) => typeof v === "number")) return [{ tokens: tokenIds(value, "input") }];
  if (value.every(Array.isArray)) {
    return value.map((ids, i) => ({ tokens: tokenIds(ids, `input[${i}]`) }));
  }
  throw clientError(`'input' must be ${INPUT_SHAPE}`, { param: "input" });
}

function tokenIds(value: unknown[], param: string): number[] {
  if (value.length > EMBED_LIMITS.tokenIds) {
    throw clientError(`'${param}' holds over ${EMBED_LIMITS.tokenIds} token ids`, { param });
  }
  for (const id of value) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id > 0x7fffffff) {
      throw clientError(`'${param}' must hold token ids: whole numbers from 0`, { param });
    }
  }
  return value as number[];
}

/** OpenAI's answer: a list of `embedding` objects in input order, the model and the usage. */
function encodeOpenAiEmbeddings(
  answer: EmbedAnswer,
  req: EmbedRequest,
): ReadableStream<Uint8Array> {
  const tokens = answer.inputTokens;
  const vector = req.encoding === "base64"
    ? (v: Float32Array) => JSON.stringify(base64Of(v))
    : floatsText;
  return vectorBody(answer.vectors, {
    head: '{"object":"list","data":[',
    item: (v, index) => `{"object":"embedding","index":${index},"embedding":${vector(v)}}`,
    tail: `],"model":${JSON.stringify(answer.model)},` +
      `"usage":{"prompt_tokens":${tokens},"total_tokens":${tokens}}}`,
  });
}

export const openAiEmbedClient: EmbedClient = {
  format: "openai-embeddings",
  codec: chatClient,
  parse: parseOpenAiEmbeddings,
  encode: encodeOpenAiEmbeddings,
};

/**
 * Characters of one input's answer in base64 beyond its values (`{"object":"embedding",
 * "index":2047,"embedding":"..."}`), generously.
 */
const ITEM_OVERHEAD = 96;

/** Characters of the answer around its items: the list, the model's name, the usage. */
const ENVELOPE = 4096;

/**
 * OpenAI-compatible servers: `POST {base_url}/embeddings` (Azure: the deployment's URL), asked
 * for base64, the float32 values the SDKs themselves ask for by default (so every server the
 * official SDK works with answers it), a third of the size of JSON numbers.
 */
export const openAiEmbedUpstream: EmbedUpstream = {
  unsupported: () => [],
  /**
   * As many inputs as fit an answer under the cap: at the vector length asked for or already
   * seen, else at the longest the gateway takes.
   */
  batchSize(req, opts) {
    const dims = req.dimensions ?? opts.seen ?? EMBED_LIMITS.dimensions;
    const perInput = 4 * Math.ceil((dims * 4) / 3) + ITEM_OVERHEAD;
    const fits = Math.floor((UPSTREAM_CAPS.answerBytes - ENVELOPE) / perInput);
    return Math.max(1, Math.min(EMBED_LIMITS.inputs, fits));
  },
  build(call) {
    const { req, inputs } = call;
    const body = {
      ...req.extra,
      model: call.model,
      input: inputsField(inputs),
      encoding_format: "base64",
      ...(req.dimensions === undefined ? {} : { dimensions: req.dimensions }),
      ...(req.user === undefined ? {} : { user: req.user }),
    };
    const url = openAiUrl(call.upstream, { path: "embeddings", model: call.model });
    return jsonPost(call, { url, body: JSON.stringify(body), auth: openAiAuth(call.upstream) });
  },
  // A base64 vector is decoded as soon as it is read: the call's answer is never held as text.
  revive: (key, value, opts) =>
    key === "embedding" && typeof value === "string" ? vectorOf(value, opts) : value,
  decode(answer, opts) {
    const body = answerObject(answer, opts.upstream);
    const data = body.data;
    if (!Array.isArray(data) || data.length !== opts.count) {
      throw badResponse(
        `upstream ${opts.upstream} answered ${Array.isArray(data) ? data.length : "no"} ` +
          `embeddings for ${opts.count} inputs`,
      );
    }
    const vectors = new Array<Float32Array>(data.length);
    data.forEach((item, i) => {
      const index = isRecord(item) && item.index !== undefined ? item.index : i;
      if (!isRecord(item) || !Number.isInteger(index) || vectors[index as number] !== undefined) {
        throw badResponse(`upstream ${opts.upstream} answered embedding ${i} without its place`);
      }
      if ((index as number) < 0 || (index as number) >= data.length) {
        throw badResponse(`upstream ${opts.upstream} answered an embedding at index ${index}`);
      }
      vectors[index as number] = vectorOf(item.embedding, opts);
    });
    return {
      vectors,
      inputTokens: reportedTokens(isRecord(body.usage) ? body.usage.prompt_tokens : undefined),
      // Echoed to the client: bounded as a client's own model name is.
      model: typeof body.model === "string" ? boundedModel(body.model) : undefined,
    };
  },
};

/** One input as its own shape (a string, or token ids), several as an array of them. */
function inputsField(inputs: EmbedInput[]): unknown {
  const one = (input: EmbedInput) => input.tokens ?? input.text ?? "";
  return inputs.length === 1 ? one(inputs[0]!) : inputs.map(one);
}
