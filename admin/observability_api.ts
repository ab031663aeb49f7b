import { type Context, Hono } from "hono";
import { GuardrailsSchema } from "../gateway/accept/guardrails.ts";
import {
  DestinationCreateSchema,
  DestinationSchema,
} from "../gateway/observability/destination_schema.ts";
import type { ObservabilityState } from "../gateway/observability/observability_state.ts";
import { validateDocument } from "../gateway/observability/validate_document.ts";
import { isRecord } from "../gateway/formats/json.ts";
import type { ConfigProblem } from "../gateway/config/validate.ts";

/**
 * docs/observability.md through the admin API: guardrails (one document) and export
 * destinations (a collection). Mounted under the admin guard.
 */
export function observabilityApi(state: ObservabilityState): Hono {
  const app = new Hono();
  app.get("/admin/api/guardrails", (c) => c.json(state.guardrails));
  app.put("/admin/api/guardrails", async (c) => {
    const checked = validateDocument(GuardrailsSchema, await body(c));
    if (!checked.ok) return invalid(c, checked.problems);
    await state.setGuardrails(checked.value);
    return c.json(checked.value);
  });
  app.get("/admin/api/destinations", (c) => c.json({ destinations: state.destinations }));
  app.post("/admin/api/destinations", async (c) => {
    const raw = await body(c);
    const checked = validateDocument(DestinationCreateSchema, raw);
    if (!checked.ok) return invalid(c, checked.problems);
    const id = checked.value.id ?? `${checked.value.kind}-${crypto.randomUUID().slice(0, 8)}`;
    if (state.destinations.some((d) => d.id === id)) {
      return c.json(
        { error: { code: "admin.conflict", message: `destination ${id} exists` } },
        409,
      );
    }
    const destination = { ...checked.value, id };
    await state.putDestination(destination);
    return c.json(destination, 201);
  });
  app.patch("/admin/api/destinations/:id", async (c) => {
    const current = state.destinations.find((d) => d.id === c.req.param("id"));
    if (!current) return notFound(c);
    const patch = await body(c);
    if (!isRecord(patch)) {
      return invalid(c, [{ path: "", message: "must be an object", kind: "invalid" }]);
    }
    // Merged first, then validated as a whole (docs/design.md "Config"), and the id never changes.
    const checked = validateDocument(DestinationSchema, { ...current, ...patch, id: current.id });
    if (!checked.ok) return invalid(c, checked.problems);
    await state.putDestination(checked.value);
    return c.json(checked.value);
  });
  app.delete("/admin/api/destinations/:id", async (c) => {
    if (!(await state.removeDestination(c.req.param("id")))) return notFound(c);
    return c.body(null, 204);
  });
  return app;
}

async function body(c: Context): Promise<unknown> {
  return await c.req.json().catch(() => undefined);
}

function invalid(c: Context, problems: ConfigProblem[]): Response {
  return c.json({
    error: { code: "admin.invalid", message: "the document did not validate" },
    problems,
  }, 400);
}

function notFound(c: Context): Response {
  return c.json({ error: { code: "admin.not_found", message: "no such destination" } }, 404);
}
