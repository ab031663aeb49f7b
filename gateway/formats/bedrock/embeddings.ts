/**
 * Embeddings on Bedrock: InvokeModel (`POST {base}/model/{modelId}/invoke`, SigV4-signed) with
 * the body of the model's own provider, one table row per family the gateway knows
 * (docs/providers.md "Embeddings"): Amazon Titan Text Embeddings (one text a call,
 * `inputTextTokenCount` in the answer) and Cohere Embed (up to 96 texts a call).
 */
import { upstreamBaseUrl } from "../../config/schema.ts";
import { GatewayError } from "../../runtime/gateway_error.ts";
import { isRecord } from "../../runtime/json.ts";
import { badResponse } from "../upstream_error.ts";
import { applyUpstreamHeaders } from "../upstream_headers.ts";
import {
  answerObject,
  EMBED_LIMITS,
  type EmbedDecode,
  type EmbedInput,
  type EmbedPiece,
  type EmbedRequest,
  type EmbedUpstream,
  reportedTokens,
} from "../embeddings.ts";
import { vectorOf } from "../embedding_vectors.ts";
import { bedrockCredentials, signedPost } from "./sign.ts";

/** One family of embedding models on Bedrock, found by its model id. */
interface Family {
  name: string;
  /** Matches the model id, also inside a cross-region profile id (`us.cohere...`) or an ARN. */
  match: RegExp;
  /** Texts per InvokeModel call. */
  batch: number;
  /** The vector lengths it takes; without, it takes none. */
  dimensions?: readonly number[];
  /** Its longest text in characters, where its documentation gives one. */
  maxChars?: number;
  body(inputs: EmbedInput[], req: EmbedRequest): Record<string, unknown>;
  decode(body: Record<string, unknown>, opts: EmbedDecode): EmbedPiece;
}

const titanBody = (inputs: EmbedInput[], req: EmbedRequest) => ({
  inputText: inputs[0]?.text ?? "",
  ...(req.dimensions === undefined ? {} : { dimensions: req.dimensions }),
});

/** `{"embedding": [...], "inputTextTokenCount": n}` (V2 adds `embeddingsByType`). */
function titanDecode(body: Record<string, unknown>, opts: EmbedDecode): EmbedPiece {
  return {
    vectors: [vectorOf(body.embedding, opts)],
    inputTokens: reportedTokens(body.inputTextTokenCount),
  };
}

/**
 * Cohere's `input_type` for a Gemini task type; a query-like task embeds as a query, the rest
 * (and a request that names none) as documents, Cohere's own advice for a corpus.
 */
const COHERE_INPUT_TYPE: Record<string, string> = {
  RETRIEVAL_QUERY: "search_query",
  QUESTION_ANSWERING: "search_query",
  FACT_VERIFICATION: "search_query",
  CODE_RETRIEVAL_QUERY: "search_query",
  CLASSIFICATION: "classification",
  CLUSTERING: "clustering",
};
const cohereInputType = (input: EmbedInput) =>
  COHERE_INPUT_TYPE[input.taskType ?? ""] ?? "search_document";

const cohereBody = (lengthField?: string) => (inputs: EmbedInput[], req: EmbedRequest) => ({
  texts: inputs.map((input) => input.text ?? ""),
  input_type: cohereInputType(inputs[0] ?? {}),
  embedding_types: ["float"],
  ...(lengthField && req.dimensions !== undefined ? { [lengthField]: req.dimensions } : {}),
});

/**
 * `{"embeddings": {"float": [[...]]}}` when embedding types were asked (they always are), or
 * `{"embeddings": [[...]]}` (`embeddings_floats`). Bedrock does not put Cohere's token count in
 * the body; its `x-amzn-bedrock-input-token-count` header is read where it comes.
 */
function cohereDecode(body: Record<string, unknown>, opts: EmbedDecode): EmbedPiece {
  const byType = isRecord(body.embeddings) ? body.embeddings.float : body.embeddings;
  if (!Array.isArray(byType) || byType.length !== opts.count) {
    throw badResponse(
      `upstream ${opts.upstream} answered ${Array.isArray(byType) ? byType.length : "no"} ` +
        `embeddings for ${opts.count} inputs`,
    );
  }
  const header = opts.headers.get("x-amzn-bedrock-input-token-count");
  const tokens = header !== null && /^\d{1,9}$/.test(header) ? Number(header) : undefined;
  return { vectors: byType.map((v) => vectorOf(v, opts)), inputTokens: tokens };
}

const FAMILIES: readonly Family[] = [
  {
    name: "Amazon Titan Text Embeddings V2",
    match: /amazon\.titan-embed-text-v2/,
    batch: 1,
    dimensions: [256, 512, 1024],
    body: titanBody,
    decode: titanDecode,
  },
  {
    name: "Amazon Titan Embeddings G1 - Text",
    match: /amazon\.titan-embed-(?:text-v1|g1-text)/,
    batch: 1,
    body: titanBody,
    decode: titanDecode,
  },
  {
    name: "Cohere Embed v4",
    match: /cohere\.embed-v4/,
    batch: 96,
    dimensions: [256, 512, 1024, 1536],
    body: cohereBody("output_dimension"),
    decode: cohereDecode,
  },
  {
    name: "Cohere Embed v3",
    match: /cohere\.embed-/,
    batch: 96,
    maxChars: 2048,
    body: cohereBody(),
    decode: cohereDecode,
  },
];

function familyOf(model: string): Family | undefined {
  return FAMILIES.find((f) => f.match.test(model));
}

/** What of the request a family cannot take, one description each. */
function familyMisses(family: Family, req: EmbedRequest): string[] {
  const missing: string[] = [];
  const { dimensions } = req;
  if (dimensions !== undefined && !family.dimensions?.includes(dimensions)) {
    missing.push(
      family.dimensions
        ? `dimensions ${dimensions} (${family.name} takes ${family.dimensions.join(", ")})`
        : `dimensions (${family.name} has one vector length)`,
    );
  }
  const max = family.maxChars;
  if (max !== undefined && req.inputs.some((i) => (i.text?.length ?? 0) > max)) {
    missing.push(`an input over ${max} characters (${family.name}'s limit)`);
  }
  const calls = Math.ceil(req.inputs.length / family.batch);
  if (calls > EMBED_LIMITS.callsPerHop) {
    missing.push(
      `${req.inputs.length} inputs (${family.name} takes ${family.batch} a call, ` +
        `and one request makes at most ${EMBED_LIMITS.callsPerHop} calls)`,
    );
  }
  if (family.batch > 1 && new Set(req.inputs.map(cohereInputType)).size > 1) {
    missing.push(`inputs of several task types (${family.name} takes one input_type a call)`);
  }
  return missing;
}

export const bedrockEmbedUpstream: EmbedUpstream = {
  unsupported(req, target) {
    if (req.tokenIds > 0) {
      return ["token ids (input as token arrays), which only an OpenAI-kind upstream reads"];
    }
    const family = familyOf(target.model);
    if (!family) {
      return [
        `model ${target.model}: not an embedding model the gateway calls on Bedrock ` +
        "(amazon.titan-embed-text-*, cohere.embed-*)",
      ];
    }
    return familyMisses(family, req);
  },
  batchSize: (_req, opts) => familyOf(opts.model)?.batch ?? 1,
  async build(call) {
    const { upstream } = call;
    const family = familyOf(call.model);
    if (upstream.kind !== "bedrock" || !family) {
      throw new GatewayError(`upstream ${upstream.id} cannot embed with ${call.model}`, {
        code: "gw.gateway.internal",
      });
    }
    const url = `${upstreamBaseUrl(upstream)}/model/${encodeURIComponent(call.model)}/invoke`;
    const request = await signedPost(url, {
      body: JSON.stringify(family.body(call.inputs, call.req)),
      credentials: bedrockCredentials(upstream, call.env),
    });
    // Not signed, which SigV4 allows: the operator's extra headers (never an x-amz-* one).
    applyUpstreamHeaders(request.headers, call);
    return request;
  },
  decode(answer, opts) {
    const family = familyOf(opts.model);
    if (!family) throw badResponse(`upstream ${opts.upstream} has no embedding family`);
    return family.decode(answerObject(answer, opts.upstream), opts);
  },
};
