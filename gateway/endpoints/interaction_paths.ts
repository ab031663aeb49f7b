import { configKey } from "../config/config_keys.ts";
import { applyUpstreamHeaders } from "../formats/upstream_headers.ts";
import { authorize, configInForce } from "../accept/admission.ts";
import type { ProxyDeps } from "../accept/proxy.ts";
import { baseHeaders, errorResponse } from "../forward/client_channel.ts";
import { CLIENT_CODECS } from "../formats/formats.ts";
import { interactionsUrl, withGoogleKey } from "../formats/gemini_interactions/paths.ts";
import { upstreamKey } from "../formats/upstream_key.ts";
import { readCapped, UPSTREAM_CAPS } from "../formats/upstream_caps.ts";
import type { Config } from "../config/schema.ts";
import { homeUnavailable, homeUpstream, unknownInteraction } from "../route/interaction_pin.ts";
import { GatewayError } from "../runtime/gateway_error.ts";

/** What a client does with a stored interaction. */
export type InteractionAction = "get" | "cancel" | "delete";

/** The query a get may carry on to the upstream (the SDK's own: a stream's replay). */
const GET_QUERY = ["stream", "last_event_id", "include_input"];

/**
 * `GET` and `DELETE /v1beta/interactions/{id}` and `POST /v1beta/interactions/{id}/cancel`
 * (docs/interactions.md "Stored interactions"): sent to the one upstream storing the interaction, as
 * recorded when it was answered, for the key that made it; its answer goes back as it came,
 * a streamed get's events included. An id this key has no record of, or of a route the key may
 * no longer use, answers 404 like one that does not exist; a storing upstream the config no
 * longer enables answers 503, and nothing is asked of any other. Like a token count, these call
 * no model: no slot, no failover, no history row.
 */
export async function serveInteraction(
  request: Request,
  opts: { id: string; action: InteractionAction; deps: ProxyDeps },
): Promise<Response> {
  const { id, action, deps } = opts;
  const requestId = crypto.randomUUID();
  const codec = CLIENT_CODECS.interactions;
  try {
    const config = configInForce(deps.state);
    const keyId = authorize(request, { config, loopback: deps.state.loopback, env: deps.env });
    const home = await deps.homes?.find(keyId, id);
    if (!home || !keyMayUse(config, { keyId, route: home.route })) throw unknownInteraction(id);
    const upstream = homeUpstream(home, config);
    if (!upstream) throw homeUnavailable(id, { upstream: home.upstream });
    const url = new URL(interactionsUrl(upstream, { id, cancel: action === "cancel" }));
    if (action === "get") {
      const asked = new URL(request.url).searchParams;
      for (const name of GET_QUERY) {
        for (const value of asked.getAll(name)) url.searchParams.append(name, value);
      }
    }
    const headers = new Headers({ accept: request.headers.get("accept") ?? "application/json" });
    const key = upstreamKey({ upstream, env: deps.env });
    if (key) headers.set(...withGoogleKey(key));
    // The operator's extra headers go on every call to the upstream (docs/providers.md).
    applyUpstreamHeaders(headers, { upstream, env: deps.env });
    const res = await askUpstream(url, {
      method: action === "get" ? "GET" : action === "delete" ? "DELETE" : "POST",
      headers,
      request,
      deps: { ...deps, config },
      upstream: upstream.id,
    });
    if (action === "delete" && res.ok) deps.homes?.forget(keyId, id);
    deps.log.event(`interaction.${action}`, { upstream: upstream.id, status: res.status });
    return res;
  } catch (err) {
    return errorResponse(codec, GatewayError.from(err), { requestId });
  }

  function keyMayUse(config: Config, at: { keyId: string | null; route: string }): boolean {
    const routes = configKey(config, at.keyId)?.routes;
    return !routes || routes.includes(at.route);
  }

  /**
   * Calls the storing upstream and passes its answer on: headers within the idle timeout, and
   * a streamed body cut (and the upstream's connection closed) when it goes silent that long
   * or when the client leaves. An error answer is read (bounded) and passed on whole.
   */
  async function askUpstream(
    url: URL,
    call: {
      method: string;
      headers: Headers;
      request: Request;
      deps: ProxyDeps & { config: Config };
      upstream: string;
    },
  ): Promise<Response> {
    const { clock, config } = call.deps;
    const idleMs = config.failover.idle_timeout_secs * 1000;
    const stop = new AbortController();
    const signal = AbortSignal.any([call.request.signal, stop.signal]);
    let cancelIdle = clock.after(idleMs, () => stop.abort(silent(call.upstream)));
    let res: Response;
    try {
      res = await call.deps.fetch(url, { method: call.method, headers: call.headers, signal });
    } catch (err) {
      cancelIdle();
      if (stop.signal.aborted) throw stop.signal.reason;
      throw new GatewayError(`could not reach upstream ${call.upstream}: ${String(err)}`, {
        code: "gw.upstream.unreachable",
        cause: err,
      });
    }
    const out = baseHeaders(requestId, {
      "content-type": res.headers.get("content-type") ?? "application/json",
    });
    if (!res.ok || !res.body) {
      const text = await readCapped(res, UPSTREAM_CAPS.errorBodyBytes).catch(() => "");
      cancelIdle();
      return new Response(text, { status: res.status, headers: out });
    }
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          cancelIdle();
          if (done) return controller.close();
          cancelIdle = clock.after(idleMs, () => stop.abort(silent(call.upstream)));
          controller.enqueue(value);
        } catch (err) {
          cancelIdle();
          controller.error(err);
        }
      },
      cancel(reason) {
        cancelIdle();
        stop.abort(reason);
        return reader.cancel(reason).catch(() => {});
      },
    });
    return new Response(body, { status: res.status, headers: out });
  }
}

function silent(upstream: string): GatewayError {
  return new GatewayError(`upstream ${upstream} sent nothing within the idle timeout`, {
    code: "gw.upstream.idle_timeout",
  });
}
