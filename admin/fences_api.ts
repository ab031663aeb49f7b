/**
 * The operator's view of the fences aborts left (docs/admin.md "Fences"): list them, lift one.
 * Admin token only, like all of /admin/api: a gateway key may neither list nor lift a fence,
 * even one its own abort made (it waits for the expiry).
 */
import { Hono } from "hono";
import type { Fence, Fences } from "../gateway/live/fences.ts";
import type { FencesView, FenceView } from "./api_types.ts";

export function fencesApi(deps: { fences: Fences; now: () => number }): Hono {
  const app = new Hono();
  app.get("/admin/api/fences", (c) => {
    const view: FencesView = {
      at: deps.now(),
      fenceSecs: deps.fences.durations(),
      fences: deps.fences.list().map(fenceView),
    };
    return c.json(view);
  });
  app.delete("/admin/api/fences/:id", async (c) => {
    const id = c.req.param("id");
    if (await deps.fences.lift(id)) return c.json({ id, lifted: true });
    const message = `no fence '${id.slice(0, 128)}' is in force (unknown, expired or lifted)`;
    return c.json({ error: { code: "admin.fence_not_found", message } }, 404);
  });
  return app;
}

function fenceView(f: Fence): FenceView {
  return {
    id: f.id,
    kind: f.kind,
    keyId: f.keyId,
    sessionId: f.sessionId,
    requestId: f.requestId,
    instanceId: f.instanceId,
    createdAt: f.createdAt,
    expiresAt: f.expiresAt,
  };
}
