import assert from "node:assert/strict";
import { renderToString } from "preact-render-to-string";
import type { HealthView } from "../admin/api_types.ts";
import type { AdminApi } from "../admin/client/api.ts";
import { createHealth } from "../admin/client/health_model.ts";
import { UpstreamHealth } from "../admin/client/islands/upstream_health.tsx";

function healthWith(history: string | null) {
  const view: HealthView = { at: 0, demo: false, upstreams: [], history };
  const api: Partial<AdminApi> = { health: () => Promise.resolve(view) };
  return createHealth(api as AdminApi);
}

Deno.test("health panel: says when history is not being recorded, and nothing when it is", async () => {
  const failing = healthWith("history writes failing since 2026-01-01T00:00:00.000Z: disk full");
  await failing.refresh();
  assert.match(
    renderToString(<UpstreamHealth health={failing} />),
    /role="alert">History is not being recorded: history writes failing since 2026-01-01T00:00:00.000Z: disk full</,
  );
  const fine = healthWith(null);
  await fine.refresh();
  assert.doesNotMatch(renderToString(<UpstreamHealth health={fine} />), /History is not/);
});
