import { Hono } from "hono";
import type { Db } from "../../db/client.ts";
import { isAdmin } from "../accept/access.ts";
import type { Peer } from "../../db/instances.ts";
import {
  forwardRequestAbort,
  forwardSessionAbort,
  isForwarded,
  PEER_ANSWER_MS,
} from "./abort_forwarding.ts";
import { findKey, presentedKey } from "../accept/auth.ts";
import type { LiveRequest } from "./live_request.ts";
import type { ProxyDeps } from "../accept/proxy.ts";
import { ERROR_CODE_HEADER } from "../runtime/gateway_error.ts";
import { abortedByOperator } from "../forward/stop_reasons.ts";

export interface ControlDeps extends ProxyDeps {
  adminToken: string | undefined;
  metricsOpen: boolean;
  db: Db;
}

type Decision = { ok: true } | { ok: false; response: Response };

/**
 * docs/design.md "Abort and disconnect" abort endpoints and /metrics. An abort is allowed for the admin
 * token, or for the gateway key that made every request it would stop. An id
 * this process does not run, and every session abort, are also put to every
 * other live instance (§11); the answers are merged.
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
  };
  const allowed = (request: Request, list: LiveRequest[]): Decision => {
    if (isAdmin(request, access())) return { ok: true };
    const config = deps.state.config;
    const presented = presentedKey(request.headers);
    const key = config ? findKey(config, { presented, env: deps.env })?.id : undefined;
    if (!key) return { ok: false, response: deny(401, "admin token or gateway key required") };
    if (list.some((l) => l.record.keyId !== key)) {
      return { ok: false, response: deny(403, "this key may abort only its own requests") };
    }
    return { ok: true };
  };
  app.post("/request/:id/abort", async (c) => {
    const id = c.req.param("id");
    const live = deps.registry.get(id);
    const list = live ? [live] : [];
    const check = allowed(c.req.raw, list);
    if (!check.ok) return check.response;
    if (live || isForwarded(c.req.raw)) {
      return stoppedOrNotRunning(deps.registry.abort(list, abortedByOperator), {
        code: "control.request_not_running",
      });
    }
    const remote = await forwardRequestAbort(id, { request: c.req.raw, deps: forwarding });
    if (remote.reply) return Response.json(remote.reply.body, { status: remote.reply.status });
    return stoppedOrNotRunning([], { code: "control.request_not_running", silent: remote.silent });
  });
  app.post("/sessions/:id/abort", async (c) => {
    const id = c.req.param("id");
    const list = deps.registry.inSession(id);
    const check = allowed(c.req.raw, list);
    if (!check.ok) return check.response;
    const stopped = deps.registry.abort(list, abortedByOperator);
    if (isForwarded(c.req.raw)) {
      return stoppedOrNotRunning(stopped, { code: "control.session_not_running" });
    }
    const remote = await forwardSessionAbort(id, { request: c.req.raw, deps: forwarding });
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
