import { type Context, Hono } from "hono";
import { GuardrailsSchema } from "../gateway/policy/guardrails.ts";
import {
  DestinationCreateSchema,
  DestinationSchema,
} from "../gateway/observability/destination_schema.ts";
import type { ObservabilityState } from "../gateway/observability/observability_state.ts";
import { validateDocument } from "../gateway/observability/validate_document.ts";
import { isRecord } from "../gateway/runtime/json.ts";
import { readJsonBody } from "../gateway/accept/read_body.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import type { ConfigProblem } from "../gateway/config/validate.ts";

/**
 * docs/observability.md through the admin API: guardrails (one document) and export
 * destinations (a collection). Mounted under the admin guard.
 */
export function observabilityApi(state: ObservabilityState): Hono {
  const app = new Hono();
  app.get("/admin/api/guardrails", (c) => c.json(state.guardrails));
  app.put("/admin/api/guardrails", async (c) => {
    const read = await body(c);
    if (read instanceof Response) return read;
    const checked = validateDocument(GuardrailsSchema, read);
    if (!checked.ok) return invalid(c, checked.problems);
    await state.setGuardrails(checked.value);
    return c.json(checked.value);
  });
  app.get("/admin/api/destinations", (c) => c.json({ destinations: state.destinations }));
  app.post("/admin/api/destinations", async (c) => {
    const raw = await body(c);
    if (raw instanceof Response) return raw;
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
    if (patch instanceof Response) return patch;
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

/** Documents are small; anything near this is a mistake, not a document (as for a config). */
const DOCUMENT_BODY_LIMIT = 1024 * 1024;

/**
 * The JSON body, read as the proxy reads one (a size limit, the JSON guard): a body too large is
 * answered 413, one that is not JSON (or nests too deep) 400, in the admin's error shape.
 */
async function body(c: Context): Promise<unknown> {
  try {
    return await readJsonBody(c.req.raw, { limit: DOCUMENT_BODY_LIMIT, signal: c.req.raw.signal });
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    const status = err.status === 413 ? 413 : 400;
    return c.json({ error: { code: err.code, message: err.message } }, status);
  }
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
