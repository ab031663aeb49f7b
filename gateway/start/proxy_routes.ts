import { handleProxy, type ProxyDeps } from "../accept/proxy.ts";
import { errorFor } from "../accept/caller_errors.ts";
import { type OriginCheckDeps, originRefusal } from "../accept/origin_check.ts";
import { handleCountTokens } from "../endpoints/count_tokens.ts";
import { unhandledError } from "../endpoints/not_found.ts";
import { EMBED_CLIENTS } from "../formats/embed_formats.ts";
import { CLIENT_CODECS } from "../formats/formats.ts";
import { getPath } from "hono/utils/url";

/** What serves one of the proxy's POST paths. */
export type ProxyRoute = (request: Request, deps: ProxyDeps) => Promise<Response>;

const proxy = (codec: keyof typeof CLIENT_CODECS): ProxyRoute => (request, deps) =>
  handleProxy(request, { codec: CLIENT_CODECS[codec], ctx: {}, deps });

/**
 * The proxy's POST paths, one table for the router (server.ts) and for `directProxy`. Gemini's
 * model paths (`/v1beta/models/...`) carry the model in the path and stay with the router.
 */
export const PROXY_ROUTES: ReadonlyMap<string, ProxyRoute> = new Map([
  ["/v1/chat/completions", proxy("chat")],
  ["/v1/responses", proxy("responses")],
  ["/v1/messages", proxy("anthropic")],
  // Embeddings (docs/providers.md "Embeddings"); Gemini's are model paths (model_paths.ts).
  ["/v1/embeddings", (request, deps) =>
    handleProxy(request, {
      codec: CLIENT_CODECS.chat,
      ctx: {},
      deps,
      embed: EMBED_CLIENTS.openai,
    })],
  [
    "/v1/messages/count_tokens",
    (request, deps) =>
      handleCountTokens(request, { codec: CLIENT_CODECS.anthropic, ctx: {}, deps }),
  ],
  // Google's Interactions API (docs/interactions.md), under both versions as the models are.
  ["/v1beta/interactions", proxy("interactions")],
  ["/v1/interactions", proxy("interactions")],
]);

/**
 * A POST to one of PROXY_ROUTES' paths, served without the router: the path read as the router
 * reads it, the same origin check the router's middleware makes, the same answer to what escapes
 * the handler. Null for anything else (another path, a trailing slash, another method), which the
 * router serves. The router cost a served answer about 30 objects and a few percent of its CPU
 * (docs/performance_log.md "The proxy's paths without the router").
 */
export function directProxy(
  deps: ProxyDeps & OriginCheckDeps,
): (request: Request) => Promise<Response> | null {
  return (request) => {
    if (request.method !== "POST") return null;
    // The router's own reading of the path (percent-decoded, up to the query), so the direct
    // path serves exactly what the router would route to the same handler.
    const path = getPath(request);
    const route = PROXY_ROUTES.get(path);
    if (!route) return null;
    const refusal = originRefusal(request, { path, deps });
    if (refusal) return Promise.resolve(errorFor(request, refusal));
    let answer: Promise<Response>;
    try {
      answer = route(request, deps);
    } catch (err) {
      return Promise.resolve(unhandledError(request, { err, log: deps.log }));
    }
    return answer.catch((err) => unhandledError(request, { err, log: deps.log }));
  };
}
