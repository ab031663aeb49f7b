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
import { type ForwardedCall, peerScope, SeenSignatures } from "../live/peer_scope.ts";
import { type Fence, fenceFromJson, fenceSummary } from "../live/fences.ts";
import { isRecord } from "../runtime/json.ts";
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
  const callOf = async (request: Request): Promise<ForwardedCall | Response> => {
    if (isForwarded(request)) {
      const now = deps.clock.now();
      const call = await peerScope(request, {
        secret: deps.peerSecret,
        now,
        seen,
        self: deps.instanceId,
      });
      return call ?? deny(401, "instance call without a valid peer signature");
    }
    if (isAdmin(request, access())) return { scope: { admin: true } };
    const config = deps.state.config;
    const presented = presentedKey(request.headers);
    const key = config ? findKey(config, { presented, env: deps.env })?.id : undefined;
    if (!key) return deny(401, "admin token or gateway key required");
    return { scope: { admin: false, keyId: key } };
  };
  app.post("/request/:id/abort", async (c) => {
    const id = c.req.param("id");
    const call = await callOf(c.req.raw);
    if (call instanceof Response) return call;
    const { scope } = call;
    const live = deps.registry.get(id);
    if (live && !mayAbort(scope, live)) {
      return deny(403, "this key may abort only its own requests");
    }
    if (live || isForwarded(c.req.raw)) {
      // The fence before the stop: an agent re-sends the turn within milliseconds of it.
      const fence = live && !live.finished && !live.signal.aborted
        ? deps.fences?.fenceTurn(live) ?? null
        : null;
      const stopped = deps.registry.abort(live ? [live] : [], abortedByOperator);
      // Stored before the answer, so the instance that forwarded this call reads it at once.
      if (fence) await deps.fences?.save(fence);
      return stoppedOrNotRunning(stopped, { code: "control.request_not_running", fence });
    }
    const remote = await forwardRequestAbort(id, { scope, deps: forwarding });
    if (remote.reply) {
      // The owner fenced the turn and stored the fence: read it here now, not at the next reload.
      if (remote.reply.status === 200 && fenceIn(remote.reply.body)) await readFences();
      return Response.json(remote.reply.body, { status: remote.reply.status });
    }
    return stoppedOrNotRunning([], { code: "control.request_not_running", silent: remote.silent });
  });
  const readFences = () =>
    deps.fences?.reload().catch((err) =>
      deps.log.event("fence.reload_failed", { error: String(err) })
    );
  app.post("/sessions/:id/abort", async (c) => {
    // The name the client used, kept as requests keep it (a digest outside the request-id rule);
    // a stored digest names itself, so a peer or the admin page may send either.
    const id = boundedSession(c.req.param("id"));
    const call = await callOf(c.req.raw);
    if (call instanceof Response) return call;
    const { scope } = call;
    const forwarded = isForwarded(c.req.raw);
    // The fence before the stop (docs/design.md "Abort and disconnect"): made here, or the one
    // the instance that took the abort made and sent along.
    const fence = forwarded
      ? adoptFence(call.fence, { id, scope, deps })
      : deps.fences?.fenceSession(id, scope) ?? null;
    // Another key's requests under the same id are another session: left alone, never a 403.
    const list = deps.registry.inSession(id).filter((l) => mayAbort(scope, l));
    const stopped = deps.registry.abort(list, () => abortedByOperator({ session: true }));
    if (forwarded) {
      return stoppedOrNotRunning(stopped, { code: "control.session_not_running" });
    }
    const [remote] = await Promise.all([
      forwardSessionAbort(id, { scope, fence, deps: forwarding }),
      fence && deps.fences?.save(fence),
    ]);
    stopped.push(...remote.stopped);
    if (!stopped.length && !fence && remote.refusal) {
      return Response.json(remote.refusal.body, { status: remote.refusal.status });
    }
    return stoppedOrNotRunning(stopped, {
      code: "control.session_not_running",
      silent: remote.silent,
      fence,
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

/**
 * The abort's answer: what it stopped and the fence it left (null when fences are off, or the
 * request was not running here), 200 when it did either. A session abort fences the session
 * even when nothing of it runs right now: an agent between two turns is stopped all the same.
 */
function stoppedOrNotRunning(
  stopped: string[],
  opts: { code: string; silent?: Peer[]; fence?: Fence | null },
): Response {
  const fence = opts.fence ?? null;
  if (stopped.length || fence) {
    return Response.json({ requests: stopped, fence: fenceSummary(fence) });
  }
  const silent = opts.silent ?? [];
  // The request may run on an instance that did not answer: say so. Addresses go to the log only.
  const message = silent.length
    ? `nothing is running on the instances that answered; no answer within ${PEER_ANSWER_MS} ms from instance ${
      silent.map((p) => p.instanceId).join(", ")
    }`
    : "nothing is running";
  return controlError(404, { code: opts.code, message });
}

/** Whether a peer's answer says it left a fence. */
function fenceIn(body: unknown): boolean {
  return isRecord(body) && isRecord(body.fence);
}

/**
 * The session fence a peer sent with its forwarded abort, held here at once, if it is one for
 * this session and this scope (the admin token's fences every key, a key's only its own).
 */
function adoptFence(
  value: unknown,
  opts: { id: string; scope: AbortScope; deps: ControlDeps },
): Fence | null {
  const fence = fenceFromJson(value);
  const keyId = opts.scope.admin ? null : opts.scope.keyId;
  if (!fence || fence.kind !== "session" || fence.sessionId !== opts.id || fence.keyId !== keyId) {
    return null;
  }
  opts.deps.fences?.adopt(fence);
  return fence;
}

function deny(status: number, message: string): Response {
  return controlError(status, { code: "control.unauthorized", message });
}

/** A control endpoint's error: its code in the body and, as on every error, in a header. */
function controlError(status: number, error: { code: string; message: string }): Response {
  return Response.json({ error }, { status, headers: { [ERROR_CODE_HEADER]: error.code } });
}
