import { Hono } from "hono";
import type { Db } from "../../db/client.ts";
import { isAdmin } from "../policy/access.ts";
import type { Peer } from "../../db/instances.ts";
import {
  forwardRequestAbort,
  forwardSessionAbort,
  isForwarded,
  PEER_ANSWER_MS,
} from "../live/abort_forwarding.ts";
import { findKey, presentedKey } from "../policy/auth.ts";
import type { ProxyDeps } from "../accept/proxy.ts";
import { type AbortScope, mayAbort } from "../live/abort_scope.ts";
import { peerScope, SeenSignatures } from "../live/peer_scope.ts";
import { ERROR_CODE_HEADER } from "../runtime/gateway_error.ts";
import { abortedByOperator } from "../forward/stop_reasons.ts";
import { boundedSession } from "../formats/session_ids.ts";

export interface ControlDeps extends ProxyDeps {
  adminToken: string | undefined;
  metricsOpen: boolean;
  db: Db;
  /** `PULSEGATE_PEER_SECRET`: signs and checks calls between instances (docs/scaling.md). */
  peerSecret?: string;
  /** `PULSEGATE_PUBLIC_URL`: forwarding is off without it. */
  publicUrl?: string;
}

/**
 * docs/design.md "Abort and disconnect" abort endpoints and /metrics. An abort acts for a scope: the admin
 * token stops anything, a gateway key only its own requests, and a session
 * abort by a key stops only that key's requests of the session
 * (docs/security.md). An id this process does not run, and every session
 * abort, are also put to every other live instance (docs/scaling.md), signed and carrying
 * the scope; the answers are merged.
 */
export function controlRoutes(deps: ControlDeps): Hono {
  const app = new Hono();
  const access = () => ({ adminToken: deps.adminToken, loopback: deps.state.loopback });
  const forwarding = {
    db: deps.db,
    instanceId: deps.instanceId,
    clock: deps.clock,
    fetch: deps.fetch,
    log: deps.log,
    peerSecret: deps.peerSecret,
    publicUrl: deps.publicUrl,
  };
  const seen = new SeenSignatures();
  /** The caller's scope; a 401 when it proves none. A forwarded call proves it by signature. */
  const scopeOf = async (request: Request): Promise<AbortScope | Response> => {
    if (isForwarded(request)) {
      const now = deps.clock.now();
      const scope = await peerScope(request, {
        secret: deps.peerSecret,
        now,
        seen,
        self: deps.instanceId,
      });
      return scope ?? deny(401, "instance call without a valid peer signature");
    }
    if (isAdmin(request, access())) return { admin: true };
    const config = deps.state.config;
    const presented = presentedKey(request.headers);
    const key = config ? findKey(config, { presented, env: deps.env })?.id : undefined;
    if (!key) return deny(401, "admin token or gateway key required");
    return { admin: false, keyId: key };
  };
  app.post("/request/:id/abort", async (c) => {
    const id = c.req.param("id");
    const scope = await scopeOf(c.req.raw);
    if (scope instanceof Response) return scope;
    const live = deps.registry.get(id);
    if (live && !mayAbort(scope, live)) {
      return deny(403, "this key may abort only its own requests");
    }
    if (live || isForwarded(c.req.raw)) {
      return stoppedOrNotRunning(deps.registry.abort(live ? [live] : [], abortedByOperator), {
        code: "control.request_not_running",
      });
    }
    const remote = await forwardRequestAbort(id, { scope, deps: forwarding });
    if (remote.reply) return Response.json(remote.reply.body, { status: remote.reply.status });
    return stoppedOrNotRunning([], { code: "control.request_not_running", silent: remote.silent });
  });
  app.post("/sessions/:id/abort", async (c) => {
    // The name the client used, kept as requests keep it (a digest outside the request-id rule);
    // a stored digest names itself, so a peer or the admin page may send either.
    const id = boundedSession(c.req.param("id"));
    const scope = await scopeOf(c.req.raw);
    if (scope instanceof Response) return scope;
    // Another key's requests under the same id are another session: left alone, never a 403.
    const list = deps.registry.inSession(id).filter((l) => mayAbort(scope, l));
    const stopped = deps.registry.abort(list, () => abortedByOperator({ session: true }));
    if (isForwarded(c.req.raw)) {
      return stoppedOrNotRunning(stopped, { code: "control.session_not_running" });
    }
    const remote = await forwardSessionAbort(id, { scope, deps: forwarding });
    stopped.push(...remote.stopped);
    if (!stopped.length && remote.refusal) {
      return Response.json(remote.refusal.body, { status: remote.refusal.status });
    }
    return stoppedOrNotRunning(stopped, {
      code: "control.session_not_running",
      silent: remote.silent,
    });
  });
  app.get("/metrics", (c) => {
    if (!deps.metricsOpen && !isAdmin(c.req.raw, access())) {
      return deny(401, "admin token required");
    }
    return c.text(deps.metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });
  return app;
}

function stoppedOrNotRunning(
  stopped: string[],
  opts: { code: string; silent?: Peer[] },
): Response {
  if (stopped.length) return Response.json({ requests: stopped });
  const silent = opts.silent ?? [];
  // The request may run on an instance that did not answer: say so. Addresses go to the log only.
  const message = silent.length
    ? `nothing is running on the instances that answered; no answer within ${PEER_ANSWER_MS} ms from instance ${
      silent.map((p) => p.instanceId).join(", ")
    }`
    : "nothing is running";
  return controlError(404, { code: opts.code, message });
}

function deny(status: number, message: string): Response {
  return controlError(status, { code: "control.unauthorized", message });
}

/** A control endpoint's error: its code in the body and, as on every error, in a header. */
function controlError(status: number, error: { code: string; message: string }): Response {
  return Response.json({ error }, { status, headers: { [ERROR_CODE_HEADER]: error.code } });
}
