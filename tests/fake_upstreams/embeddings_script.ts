/**
 * Fakes of the providers' embeddings APIs (docs/providers.md "Embeddings"): each answers only
 * at its exact URL, with its auth and body shape (else a 400 naming what was wrong), and its
 * vectors are made from the inputs it was sent (`vectorFor`), so a test can tell that every
 * input got its own vector, in order, whatever the translation and batching in between.
 */
import type { Call, Handler, Script } from "./server.ts";
import { checked, type Expected } from "./cloud_script.ts";
import { verifySigV4 } from "./bedrock_script.ts";

/**
 * A vector for a text: the same text gives the same vector. Its values are multiples of 1/1024
 * below 1, exact in float32, so float and base64 answers compare equal.
 */
export function vectorFor(text: string | number[], dims: number): number[] {
  const key = typeof text === "string" ? text : text.join(",");
  let hash = 2166136261;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 16777619);
  return Array.from({ length: dims }, (_, i) => (((hash >>> 0) + i * 7919) % 2047 - 1023) / 1024);
}

/** A vector's float32 values, little-endian, in base64: OpenAI's `encoding_format: base64`. */
export function base64Vector(values: number[]): string {
  const bytes = new Uint8Array(values.length * 4);
  const view = new DataView(bytes.buffer);
  values.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return bytes.toBase64();
}

const json = { "content-type": "application/json" };

export function jsonScript(body: unknown, status = 200): Script {
  return { status, headers: json, body: [{ send: JSON.stringify(body) }] };
}

/** The inputs of an OpenAI embeddings body, as a list. */
function openAiInputs(input: unknown): (string | number[])[] {
  if (typeof input === "string") return [input];
  if (Array.isArray(input) && input.every((v) => typeof v === "number")) return [input];
  return input as (string | number[])[];
}

/**
 * An OpenAI (or OpenAI-compatible, or Azure) embeddings endpoint: the vectors of the inputs it
 * was sent, as `encoding_format` asks, with usage (one token per 4 characters, or per id).
 */
export function openAiEmbeddings(
  expected: (call: Call) => Expected,
  opts: { dims?: number; model?: string } = {},
): Handler {
  return checked(expected, (call) => {
    const body = call.json as Record<string, unknown>;
    const inputs = openAiInputs(body.input);
    const dims = typeof body.dimensions === "number" ? body.dimensions : opts.dims ?? 8;
    const base64 = body.encoding_format === "base64";
    const tokens = inputs.reduce<number>(
      (n, i) => n + (typeof i === "string" ? Math.ceil(i.length / 4) : i.length),
      0,
    );
    return jsonScript({
      object: "list",
      data: inputs.map((input, index) => {
        const vector = vectorFor(input, dims);
        return { object: "embedding", index, embedding: base64 ? base64Vector(vector) : vector };
      }),
      model: opts.model ?? body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  });
}

/** OpenAI's shape: `{model, input, encoding_format, dimensions?}` and nothing unexpected. */
export function openAiBody(
  opts: { model: string; dimensions?: number },
): (json: Record<string, unknown>) => string | null {
  return (body) => {
    if (body.model !== opts.model) return `model ${body.model}`;
    if (body.encoding_format !== "base64") return `encoding_format ${body.encoding_format}`;
    if (body.dimensions !== opts.dimensions) return `dimensions ${body.dimensions}`;
    const input = body.input;
    const ok = typeof input === "string" ||
      (Array.isArray(input) && input.length > 0 &&
        input.every((i) => typeof i === "string" || Array.isArray(i) || typeof i === "number"));
    return ok ? null : `input ${JSON.stringify(input)}`;
  };
}

/** Gemini's `:batchEmbedContents`: the vectors of each request's text, and no usage. */
export function geminiBatchEmbeddings(
  expected: (call: Call) => Expected,
  opts: { dims?: number } = {},
): Handler {
  return checked(expected, (call) => {
    const requests = (call.json as { requests: Record<string, unknown>[] }).requests;
    return jsonScript({
      embeddings: requests.map((r) => {
        const parts = (r.content as { parts: { text: string }[] }).parts;
        const dims = typeof r.outputDimensionality === "number"
          ? r.outputDimensionality
          : opts.dims ?? 8;
        return { values: vectorFor(parts.map((p) => p.text).join("\n"), dims) };
      }),
    });
  });
}

/** Gemini's request shape: each request names the model, a text content, and the length. */
export function geminiBody(
  /** `dimensions`: the length every request must ask, none, or "any". */
  opts: { model: string; dimensions?: number | "any"; count?: number },
): (json: Record<string, unknown>) => string | null {
  return (body) => {
    const requests = body.requests;
    if (!Array.isArray(requests) || requests.length === 0) return "no requests";
    if (requests.length > 100) return `${requests.length} requests in one batch (at most 100)`;
    if (opts.count !== undefined && requests.length !== opts.count) {
      return `${requests.length} requests, expected ${opts.count}`;
    }
    for (const r of requests as Record<string, unknown>[]) {
      if (r.model !== `models/${opts.model}`) return `model ${r.model}`;
      if (opts.dimensions !== "any" && r.outputDimensionality !== opts.dimensions) {
        return `outputDimensionality ${r.outputDimensionality}`;
      }
      const parts = (r.content as { parts?: unknown[] } | undefined)?.parts;
      if (!Array.isArray(parts) || !parts.every((p) => typeof (p as { text?: unknown }).text)) {
        return `content ${JSON.stringify(r.content)}`;
      }
    }
    return null;
  };
}

export const AWS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  region: "us-east-1",
};

/** The request as Bedrock received it, for its signature. */
function signedRequest(call: Call): Request {
  return new Request(`http://${call.headers.get("host")}${call.path}`, {
    method: call.method,
    headers: call.headers,
    body: call.body,
  });
}

/**
 * Bedrock's InvokeModel for Titan Text Embeddings (one text a call, its token count in the
 * answer) and Cohere Embed (texts, `input_type`, the floats by type), at the model's exact
 * path, refusing a bad SigV4 signature as Bedrock does (403).
 */
export function bedrockEmbeddings(opts: { model: string; dims?: number }): Handler {
  return async (call) => {
    if (!await verifySigV4(signedRequest(call), AWS)) {
      return jsonScript({ message: "The request signature we calculated does not match" }, 403);
    }
    const path = `/model/${encodeURIComponent(opts.model)}/invoke`;
    const answer = (body: Record<string, unknown>) =>
      opts.model.includes("titan") ? titan(body, opts) : cohere(body, opts);
    return checked(() => ({ path }), (c) => answer(c.json as Record<string, unknown>))(call);
  };
}

function titan(body: Record<string, unknown>, opts: { dims?: number }): Script {
  const keys = Object.keys(body).sort().join(",");
  if (keys !== "inputText" && keys !== "dimensions,inputText") {
    return jsonScript({ message: `Malformed input request: ${keys}` }, 400);
  }
  const text = body.inputText as string;
  const dims = typeof body.dimensions === "number" ? body.dimensions : opts.dims ?? 1024;
  return jsonScript({
    embedding: vectorFor(text, dims),
    inputTextTokenCount: Math.ceil(text.length / 4),
    embeddingsByType: { float: vectorFor(text, dims) },
  });
}

function cohere(body: Record<string, unknown>, opts: { dims?: number }): Script {
  const texts = body.texts;
  if (!Array.isArray(texts) || texts.length === 0 || texts.length > 96) {
    return jsonScript({ message: `texts: ${JSON.stringify(texts)?.slice(0, 80)}` }, 400);
  }
  const types = ["search_document", "search_query", "classification", "clustering"];
  if (!types.includes(body.input_type as string)) {
    return jsonScript({ message: `input_type ${body.input_type}` }, 400);
  }
  if (JSON.stringify(body.embedding_types) !== '["float"]') {
    return jsonScript({ message: `embedding_types ${JSON.stringify(body.embedding_types)}` }, 400);
  }
  const dims = opts.dims ?? 1024;
  return jsonScript({
    id: "emb-1",
    embeddings: { float: (texts as string[]).map((t) => vectorFor(t, dims)) },
    response_type: "embeddings_by_type",
    texts,
  });
}
