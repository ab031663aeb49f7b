import { handleCountTokens } from "./count_tokens.ts";
import { boundedModel } from "../formats/bounded_names.ts";
import { CLIENT_CODECS } from "../formats/formats.ts";
import { describeModel, GEMINI_METHODS } from "./model_list.ts";
import { methodNotAllowed, notFound } from "./not_found.ts";
import { handleProxy, type ProxyDeps } from "../accept/proxy.ts";
import { EMBED_CLIENTS } from "../formats/embed_formats.ts";
import type { EmbedClient } from "../formats/embeddings.ts";

/** Gemini's embedding methods (docs/providers.md "Embeddings"), each with its client. */
const EMBED_METHODS: Record<string, EmbedClient> = {
  embedContent: EMBED_CLIENTS.gemini,
  batchEmbedContents: EMBED_CLIENTS.geminiBatch,
};

/** The methods a model path answers: generation, counting and embedding. */
const METHODS: readonly string[] = [...GEMINI_METHODS, ...Object.keys(EMBED_METHODS)];

const isGeminiMethod = (name: string): boolean => METHODS.includes(name);

/**
 * Everything under `/v1beta/models/` and `/v1/models/`: Gemini's methods on
 * a model (`{model}:generateContent`, `:streamGenerateContent`,
 * `:countTokens`, `:embedContent`, `:batchEmbedContents`), and one model's description (GET,
 * any SDK). The method is
 * what follows the last colon, so route names may hold colons and slashes.
 */
export function serveModelPath(request: Request, deps: ProxyDeps): Promise<Response> | Response {
  const url = new URL(request.url);
  const rest = url.pathname.replace(/^\/v1(?:beta)?\/models\//, "");
  const colon = rest.lastIndexOf(":");
  const method = colon < 0 ? "" : rest.slice(colon + 1);
  if (request.method === "GET") {
    if (isGeminiMethod(method)) return methodNotAllowed(request, ["POST"]);
    return describeModel(request, { id: pathSegment(rest), deps });
  }
  if (request.method !== "POST") {
    return methodNotAllowed(request, isGeminiMethod(method) ? ["POST"] : ["GET", "HEAD"]);
  }
  if (!isGeminiMethod(method)) {
    const named = colon < 0 ? "no method" : `unknown method ':${method}'`;
    return notFound(
      request,
      `${named} in ${url.pathname}; a model answers :${METHODS.join(", :")}`,
    );
  }
  const ctx = {
    // Bounded before anything stores or echoes it: the row's route is this name (docs/security.md).
    pathModel: boundedModel(pathSegment(rest.slice(0, colon))),
    pathStream: method === "streamGenerateContent",
    sse: url.searchParams.get("alt") === "sse",
  };
  const opts = { codec: CLIENT_CODECS.gemini, ctx, deps };
  if (method === "countTokens") return handleCountTokens(request, opts);
  return handleProxy(request, { ...opts, embed: EMBED_METHODS[method] });
}

/**
 * A percent-encoded path segment. One that is not valid encoding (`%` alone)
 * is taken literally, as most servers do, so it names the route it spells
 * or gets the unknown-model answer that says so.
 */
function pathSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
