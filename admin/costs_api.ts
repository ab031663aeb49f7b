import { type Context, Hono } from "hono";
import { COST_GROUPS, costTotals } from "../db/cost_queries.ts";
import type { Reads } from "../db/read_db.ts";
import type { RunState } from "../gateway/policy/run_state.ts";
import { keyUses } from "../gateway/policy/key_limits.ts";
import type { KeyUsageMeter } from "../gateway/policy/key_usage_meter.ts";
import type { Clock } from "../gateway/runtime/clock.ts";
import type { CostReport, KeysView } from "./api_types.ts";

const DAY_MS = 86_400_000;

/**
 * Cost totals and key use for the admin page (docs/admin.md "Cost"). Mounted under the
 * admin guard. `db` is where history is read: the admin reader for a local file
 * (docs/scaling.md "Admin reads").
 */
export function costsApi(
  deps: { db: Reads; clock: Clock; state: RunState; meter: KeyUsageMeter },
): Hono {
  const app = new Hono();
  app.get("/admin/api/costs", async (c) => {
    const query = parseCostQuery(new URL(c.req.url).searchParams, deps.clock.now());
    if (!query.ok) return badQuery(c, query.message);
    const totals = await costTotals(deps.db, query.report);
    return c.json({ ...query.report, totals } satisfies CostReport);
  });
  app.get("/admin/api/keys", async (c) => {
    const keys = deps.state.config?.keys ?? [];
    const uses = await keyUses(keys, { meter: deps.meter, now: deps.clock.now });
    const view: KeysView = {
      keys: keys.map((k) => ({
        id: k.id,
        enabled: k.enabled,
        rpm: k.rpm ?? null,
        tpm: k.tpm ?? null,
        budget: k.budget ?? null,
        use: uses.get(k.id) ?? null,
      })),
    };
    return c.json(view);
  });
  return app;
}

type Parsed =
  | { ok: true; report: Omit<CostReport, "totals"> }
  | { ok: false; message: string };

/** `by` (route, key or upstream; route by default), `since` and `until` in epoch ms. */
export function parseCostQuery(params: URLSearchParams, now: number): Parsed {
  const by = params.get("by") ?? "route";
  const group = COST_GROUPS.find((g) => g === by);
  if (!group) return { ok: false, message: `by must be one of ${COST_GROUPS.join(", ")}` };
  const bounds: Record<"since" | "until", number> = { since: now - DAY_MS, until: now + 1 };
  for (const name of ["since", "until"] as const) {
    const value = params.get(name);
    if (value === null) continue;
    if (!/^\d{1,15}$/.test(value)) return { ok: false, message: `${name} must be epoch ms` };
    bounds[name] = Number(value);
  }
  if (bounds.until <= bounds.since) return { ok: false, message: "until must be after since" };
  return { ok: true, report: { by: group, ...bounds } };
}

function badQuery(c: Context, message: string) {
  return c.json({ error: { code: "admin.bad_query", message } }, 400);
}
