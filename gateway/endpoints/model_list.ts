import { configKey } from "../config/config_keys.ts";
import { boundedModel } from "../formats/bounded_names.ts";
import type { Route } from "../config/schema.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import { authorize } from "../accept/admission.ts";
import { clientCodecOf, errorFor } from "../accept/caller_errors.ts";
import type { RunState } from "../policy/run_state.ts";

/** The Gemini methods every route answers, as `supportedGenerationMethods` lists them. */
export const GEMINI_METHODS = ["generateContent", "streamGenerateContent", "countTokens"] as const;

export interface ModelListDeps {
  state: RunState;
  env: (name: string) => string | undefined;
}

/**
 * The routes a model list shows the caller: the enabled ones its key may use,
 * in config order. The list needs the proxy's own auth, so routes (and
 * whether keys exist) are not told to anyone without a key (docs/security.md).
 */
function listedRoutes(request: Request, deps: ModelListDeps): Route[] | GatewayError {
  const config = deps.state.config;
  // Safe mode: nothing to list, and nothing to authorize against.
  if (!config) return [];
  try {
    const keyId = authorize(request, { config, loopback: deps.state.loopback, env: deps.env });
    const allowed = configKey(config, keyId)?.routes;
    return config.routes.filter((r) => r.enabled && (!allowed || allowed.includes(r.model)));
  } catch (err) {
    return GatewayError.from(err);
  }
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
export function listModels(request: Request, deps: ModelListDeps): Response {
  const routes = listedRoutes(request, deps);
  if (routes instanceof GatewayError) return errorFor(request, routes);
  if (isGemini(request)) return Response.json({ models: routes.map(geminiModel) });
  return Response.json({ object: "list", data: routes.map(sdkModel), has_more: false });
}

/** GET /v1/models/{id} and /v1beta/models/{model}: one route, or 404 in the client's format. */
export function describeModel(
  request: Request,
  opts: { id: string; deps: ModelListDeps },
): Response {
  const gemini = isGemini(request);
  // Gemini names a model `models/{model}`; the SDKs send either form.
  const id = boundedModel(gemini ? opts.id.replace(/^models\//, "") : opts.id);
  const routes = listedRoutes(request, opts.deps);
  if (routes instanceof GatewayError) return errorFor(request, routes);
  const route = routes.find((r) => r.model === id);
  if (route) return Response.json(gemini ? geminiModel(route) : sdkModel(route));
  const err = clientError(
    `model '${id}' is not a route of this gateway; GET /v1/models lists them`,
    {
      code: "gw.client.unknown_model",
      param: "model",
    },
  );
  return errorFor(request, err);
}
