/**
 * Gemini's embeddings, as a client format (`POST /v1beta/models/{model}:embedContent` and
 * `:batchEmbedContents`, also under /v1) and as an upstream of the `gemini` kind (always
 * `:batchEmbedContents`, at most 100 requests a call): docs/providers.md "Embeddings".
 */
import { jsonPost } from "../format_kit.ts";
import { upstreamBaseUrl } from "../../config/schema.ts";
import { requireArray, requireRecord } from "../request_fields.ts";
import { clientError } from "../../runtime/gateway_error.ts";
import { isRecord } from "../../runtime/json.ts";
import { badResponse } from "../upstream_error.ts";
import type { ClientRequestContext } from "../format.ts";
import { vertexOf } from "../cloud/vertex.ts";
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
import { floatsText, vectorBody, vectorOf } from "../embedding_vectors.ts";
import { geminiClient } from "./mod.ts";
import { geminiModelPath } from "./request.ts";

/** Gemini's `taskType` words are upper-case enum names. */
const TASK_TYPE = /^[A-Z][A-Z_]{0,63}$/;

/** One `EmbedContentRequest`: its content's text parts, task type, title, length. */
function readRequest(
  value: unknown,
  opts: { param: string; route: string },
): { input: EmbedInput; dimensions?: number } {
  const { param } = opts;
  const r = requireRecord(value, param);
  if (r.model !== undefined && r.model !== null) {
    const model = r.model;
    // Route names may hold slashes: `models/` is taken off whatever follows it.
    if (model !== opts.route && model !== `models/${opts.route}`) {
      throw clientError(`'${param}.model' must be the model in the path, models/${opts.route}`, {
        param: `${param}.model`,
      });
    }
  }
  const content = requireRecord(r.content, `${param}.content`);
  const parts = requireArray(content.parts, `${param}.content.parts`).map((part, i) => {
    const at = `${param}.content.parts[${i}]`;
    if (!isRecord(part) || typeof part.text !== "string") {
      throw clientError(`'${at}' must be a text part: only text is embedded through the gateway`, {
        code: "gw.client.unsupported",
        param: at,
      });
    }
    return part.text;
  });
  const input: EmbedInput = { text: parts.join("\n"), parts };
  if (r.taskType !== undefined && r.taskType !== null) {
    if (typeof r.taskType !== "string" || !TASK_TYPE.test(r.taskType)) {
      throw clientError(`'${param}.taskType' must be a task type such as RETRIEVAL_QUERY`, {
        param: `${param}.taskType`,
      });
    }
    input.taskType = r.taskType;
  }
  if (r.title !== undefined && r.title !== null) {
    if (typeof r.title !== "string") {
      throw clientError(`'${param}.title' must be a string`, { param: `${param}.title` });
    }
    input.title = r.title;
  }
  const dimensions = boundedDimensions(r.outputDimensionality, `${param}.outputDimensionality`);
  return { input, dimensions };
}

function routeOf(ctx: ClientRequestContext): string {
  const route = ctx.pathModel ?? "";
  if (route === "") throw clientError("the path names no model", { param: "model" });
  return route;
}

function parseOne(body: Record<string, unknown>, ctx: ClientRequestContext): EmbedRequest {
  const route = routeOf(ctx);
  const { input, dimensions } = readRequest(body, { param: "request", route });
  const counts = counted([input], { dimensions, lengthParam: "request.outputDimensionality" });
  return { model: route, inputs: [input], dimensions, encoding: "float", ...counts };
}

function parseBatch(body: Record<string, unknown>, ctx: ClientRequestContext): EmbedRequest {
  const route = routeOf(ctx);
  const list = requireArray(body.requests, "requests");
  if (list.length > EMBED_LIMITS.inputs) {
    throw clientError(
      `'requests' holds ${list.length} requests; at most ${EMBED_LIMITS.inputs} per batch`,
      { param: "requests" },
    );
  }
  const read = list.map((r, i) => readRequest(r, { param: `requests[${i}]`, route }));
  const dimensions = read[0]?.dimensions;
  read.forEach((r, i) => {
    if (r.dimensions !== dimensions) {
      throw clientError(
        `'requests[${i}].outputDimensionality' differs from the first request's: ` +
          "one batch is embedded at one length",
        { param: `requests[${i}].outputDimensionality` },
      );
    }
  });
  const inputs = read.map((r) => r.input);
  const counts = counted(inputs, {
    param: "requests",
    dimensions,
    lengthParam: "requests[0].outputDimensionality",
  });
  return { model: route, inputs, dimensions, encoding: "float", ...counts };
}

/** The bounds every request shares, and inputs × the length asked against the cap on values. */
function counted(
  inputs: EmbedInput[],
  opts: { param?: string; dimensions?: number; lengthParam: string },
): { chars: number; tokenIds: number } {
  const counts = boundedInputs(inputs, { param: opts.param ?? "content" });
  boundedValues(inputs.length, { dimensions: opts.dimensions, param: opts.lengthParam });
  return counts;
}

const values = (v: Float32Array) => `{"values":${floatsText(v)}}`;

export const geminiEmbedClient: EmbedClient = {
  format: "gemini-embeddings",
  codec: geminiClient,
  parse: parseOne,
  encode: (answer: EmbedAnswer) =>
    vectorBody(answer.vectors, { head: '{"embedding":', item: values, tail: "}" }),
};

export const geminiBatchEmbedClient: EmbedClient = {
  format: "gemini-embeddings",
  codec: geminiClient,
  parse: parseBatch,
  encode: (answer: EmbedAnswer) =>
    vectorBody(answer.vectors, { head: '{"embeddings":[', item: values, tail: "]}" }),
};

/** Requests per `batchEmbedContents` call: the Gemini API's own limit. */
const GEMINI_BATCH = 100;

const apiKeyHeader = (key: string): [string, string] => ["x-goog-api-key", key];

export const geminiEmbedUpstream: EmbedUpstream = {
  unsupported(req, target) {
    const missing: string[] = [];
    if (vertexOf(target.upstream)) {
      missing.push("embeddings on Vertex AI (its :predict API is not served)");
    }
    if (req.tokenIds > 0) {
      missing.push("token ids (input as token arrays), which only an OpenAI-kind upstream reads");
    }
    return missing;
  },
  batchSize: () => GEMINI_BATCH,
  build(call) {
    const model = geminiModelPath(call.model);
    const { dimensions } = call.req;
    const requests = call.inputs.map((input) => ({
      model,
      content: { parts: (input.parts ?? [input.text ?? ""]).map((text) => ({ text })) },
      ...(input.taskType === undefined ? {} : { taskType: input.taskType }),
      ...(input.title === undefined ? {} : { title: input.title }),
      ...(dimensions === undefined ? {} : { outputDimensionality: dimensions }),
    }));
    const url = `${upstreamBaseUrl(call.upstream)}/v1beta/${model}:batchEmbedContents`;
    return jsonPost(call, { url, body: JSON.stringify({ requests }), auth: apiKeyHeader });
  },
  decode(answer, opts) {
    const body = answerObject(answer, opts.upstream);
    const list = body.embeddings;
    if (!Array.isArray(list) || list.length !== opts.count) {
      throw badResponse(
        `upstream ${opts.upstream} answered ${Array.isArray(list) ? list.length : "no"} ` +
          `embeddings for ${opts.count} inputs`,
      );
    }
    const vectors = list.map((e) => vectorOf(isRecord(e) ? e.values : undefined, opts));
    // Newer answers report the prompt's tokens; the Gemini API long reported none.
    const usage = isRecord(body.usageMetadata) ? body.usageMetadata.promptTokenCount : undefined;
    return { vectors, inputTokens: reportedTokens(usage) };
  },
};
