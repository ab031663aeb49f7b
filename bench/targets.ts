/**
 * What the bench sends requests to, and how each one is asked for the same answer from the same
 * fake upstream: direct (no proxy, the baseline), the floor proxy (and its JS relay variant),
 * pulsegate (with history on and off) and Portkey.
 */

export type TargetId =
  | "direct"
  | "floor"
  | "floor_js"
  | "pulsegate"
  | "pulsegate_no_history"
  | "portkey";

export const TARGET_LABELS: Record<TargetId, string> = {
  direct: "direct (no proxy)",
  floor: "floor (Deno.serve + fetch)",
  floor_js: "floor, JS relay (each chunk read and enqueued in JS)",
  pulsegate: "pulsegate",
  pulsegate_no_history: "pulsegate, history off",
  portkey: "Portkey",
};

/** A fake upstream mode: the first path segment the fake serves (see fake_upstream.ts). */
export type FakeMode = string;

/** One request, fully spelled out, so a load job in another process can send it as is. */
export interface RequestSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** Where each target listens; a target whose service is missing is simply not here. */
export type Endpoints = Partial<Record<TargetId, string>> & { fake: string };

export function requestFor(
  target: TargetId,
  opts: { endpoints: Endpoints; mode: FakeMode; route?: string; stream?: boolean },
): RequestSpec {
  const { endpoints, mode } = opts;
  const base = target === "direct" ? endpoints.fake : endpoints[target];
  if (!base) throw new Error(`target ${target} is not running`);
  const isGateway = target === "pulsegate" || target === "pulsegate_no_history";
  const body = JSON.stringify({
    // pulsegate names a route per mode; the others go straight to the fake's model.
    model: isGateway ? opts.route ?? mode : "m",
    messages: [{ role: "user", content: "Say pong." }],
    max_tokens: 16,
    ...(opts.stream ? { stream: true } : {}),
  });
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (target === "portkey") {
    headers["authorization"] = "Bearer bench";
    headers["x-portkey-provider"] = "openai";
    headers["x-portkey-custom-host"] = `${endpoints.fake}/${mode}/v1`;
  }
  const path = isGateway || target === "portkey"
    ? "/v1/chat/completions"
    : `/${mode}/v1/chat/completions`;
  return { url: base + path, headers, body };
}

/**
 * A pulsegate config with one route per fake mode (route name -> mode), each on its own
 * upstream, so a route is exactly one candidate: the bench measures the path, not failover.
 */
export function gatewayConfig(
  opts: { fake: string; routes: Record<string, FakeMode>; failover?: Record<string, unknown> },
): Record<string, unknown> {
  const routes = Object.entries(opts.routes);
  return {
    ...(opts.failover ? { failover: opts.failover } : {}),
    upstreams: routes.map(([route, mode]) => ({
      id: route,
      kind: "openai-chat",
      base_url: `${opts.fake}/${mode}/v1`,
      // Throughput runs must measure the gateway, not its slot limit.
      max_in_flight: 100_000,
    })),
    routes: routes.map(([route]) => ({
      model: route,
      candidates: [{ upstream: route, model: "m" }],
    })),
  };
}
