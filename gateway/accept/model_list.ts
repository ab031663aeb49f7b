import type { Route } from "../config/schema.ts";
import { clientError } from "../runtime/gateway_error.ts";
import { clientCodecOf, errorFor } from "./not_found.ts";
import type { RunState } from "./proxy.ts";

/** The Gemini methods every route answers, as `supportedGenerationMethods` lists them. */
export const GEMINI_METHODS = ["generateContent", "streamGenerateContent", "countTokens"] as const;

/**
 * The routes a model list shows: the enabled ones, in config order. Every
 * caller sees them all, as GET /v1/models always did: a route name is not a
 * secret, and a key's route list is enforced where the route is used.
 */
function listedRoutes(state: RunState): Route[] {
  return state.config?.routes.filter((r) => r.enabled) ?? [];
}

/**
 * One model as the OpenAI and the Anthropic SDKs read it: the two shapes
 * differ only in field names, so one object carries both.
 */
function sdkModel(route: Route): Record<string, unknown> {
  return {
    id: route.model,
    object: "model",
    type: "model",
    display_name: route.model,
    created: 0,
    created_at: new Date(0).toISOString(),
    owned_by: "pulsegate",
  };
}

/** One model as Gemini's models.get and models.list describe it. */
function geminiModel(route: Route): Record<string, unknown> {
  return {
    name: `models/${route.model}`,
    version: "pulsegate",
    displayName: route.model,
    description: `pulsegate route '${route.model}'`,
    supportedGenerationMethods: [...GEMINI_METHODS],
  };
}

function isGemini(request: Request): boolean {
  return clientCodecOf(request)?.format === "gemini";
}

/**
 * GET /v1/models (OpenAI and Anthropic shape, or Gemini's when Google's SDK
 * asks it, as its `v1` API version does) and GET /v1beta/models. One page:
 * a gateway has few routes, so `pageSize` and `pageToken` are not needed.
 */
export function listModels(request: Request, opts: { state: RunState }): Response {
  const routes = listedRoutes(opts.state);
  if (isGemini(request)) return Response.json({ models: routes.map(geminiModel) });
  return Response.json({ object: "list", data: routes.map(sdkModel), has_more: false });
}

/** GET /v1/models/{id} and /v1beta/models/{model}: one route, or 404 in the client's format. */
export function describeModel(request: Request, opts: { id: string; state: RunState }): Response {
  const gemini = isGemini(request);
  // Gemini names a model `models/{model}`; the SDKs send either form.
  const id = gemini ? opts.id.replace(/^models\//, "") : opts.id;
  const route = listedRoutes(opts.state).find((r) => r.model === id);
  if (route) return Response.json(gemini ? geminiModel(route) : sdkModel(route));
  const err = clientError(
    `model '${id}' is not a route of this gateway; GET /v1/models lists them`,
    {
      code: "gw.client.unknown_model",
      status: 404,
      param: "model",
    },
  );
  return errorFor(request, err);
}
