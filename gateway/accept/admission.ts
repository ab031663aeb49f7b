import { configKey } from "../config/config_keys.ts";
import { findKey, presentedKey } from "../policy/auth.ts";
import type { Config, Route } from "../config/schema.ts";
import { clientError, GatewayError } from "../runtime/gateway_error.ts";
import type { RunState } from "../policy/run_state.ts";
import { requestPlan } from "../route/request_plan.ts";

/**
 * The checks every routed call passes before its body means anything: the
 * gateway is serving, the key is known, the model names a route the key may
 * use. Generation and token counting share them, so both refuse alike.
 */

/** The config in force; throws while shutting down or in safe mode. */
export function configInForce(state: RunState): Config {
  if (state.shuttingDown) {
    throw new GatewayError("gateway is shutting down", { code: "gw.gateway.shutting_down" });
  }
  if (!state.config) {
    throw new GatewayError(
      `gateway is in safe mode: ${state.safeModeReason ?? "no valid config"}`,
      { code: "config.invalid" },
    );
  }
  return state.config;
}

/** Answers the key id, or null for an open proxy; throws when refused (docs/design.md "Client API"). */
export function authorize(
  request: Request,
  opts: { config: Config; loopback: boolean; env: (name: string) => string | undefined },
): string | null {
  const { config } = opts;
  if (!config.keys.length) {
    if (opts.loopback) return null;
    throw new GatewayError(
      "no gateway keys are configured, so the proxy is open only on loopback",
      {
        code: "gw.client.forbidden",
        source: "config",
      },
    );
  }
  const key = findKey(config, { presented: presentedKey(request.headers), env: opts.env });
  if (!key) {
    throw clientError("missing or unknown gateway key", { code: "gw.client.unauthorized" });
  }
  return key.id;
}

/**
 * The enabled route `model` names, if the key may use it; throws 404 otherwise. A route the key
 * may not use is answered exactly like one that does not exist, so a key cannot map the routes
 * it is not given (docs/security.md "Routes a key may not use"); only the history row says why.
 */
export function routeFor(config: Config, opts: { model: string; keyId: string | null }): Route {
  // The first enabled route of the name, from a table made once per config.
  const route = requestPlan(config).routes.get(opts.model);
  const keyRoutes = configKey(config, opts.keyId)?.routes;
  const refused = route && keyRoutes && !keyRoutes.includes(route.model);
  if (route && !refused) return route;
  throw clientError(
    `model '${opts.model}' is not a route of this gateway; GET /v1/models lists them`,
    {
      code: "gw.client.unknown_model",
      param: "model",
      recorded: refused
        ? `key '${opts.keyId}' may not use route '${route.model}' (answered as an unknown model)`
        : undefined,
    },
  );
}
