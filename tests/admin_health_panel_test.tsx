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

Deno.test("health panel: state, error rate, content tokens/s and each pool's share", async () => {
  const recent = {
    windowMs: 900_000,
    attempts: 4,
    successes: 3,
    failures: 1,
    idleTimeouts: 0,
    cancelled: 0,
    firstContentP50Ms: 320,
    firstContentP95Ms: 900,
    errorRate: 0.25,
    tokensPerSecP50: 87.4,
  };
  const upstream = {
    kind: "openai-chat",
    enabled: true,
    inFlight: 0,
    maxInFlight: 64,
    paused: false,
    pausedUntil: null,
    pauseReason: null,
    consecutiveFailures: 0,
    pauseCount: 1,
    recent,
  };
  const view: HealthView = {
    at: 0,
    demo: false,
    history: null,
    upstreams: [
      {
        ...upstream,
        id: "key-a",
        state: "ok",
        pools: [{
          route: "smart",
          index: 0,
          pick: "weighted",
          model: "m",
          weight: 3,
          share: 0.74,
          window: 200,
        }],
      },
      { ...upstream, id: "key-b", state: "probing", pools: [] },
    ],
  };
  const health = createHealth(
    { health: () => Promise.resolve(view) } as Partial<AdminApi> as AdminApi,
  );
  await health.refresh();
  const html = renderToString(<UpstreamHealth health={health} />);
  const row = (id: string) => html.match(new RegExp(`data-upstream="${id}".*?</tr>`))?.[0] ?? "";
  assert.match(row("key-a"), /1 failed \(25\u00a0%\)/);
  assert.match(row("key-a"), /Content tokens\/s">87<small>median/);
  assert.match(row("key-a"), /74\u00a0%.*of smart pool 1 \(weighted, weight 3.*last 200/);
  assert.match(row("key-a"), /class="state ok"/);
  assert.match(row("key-b"), /class="state probing"[^>]*>probing</);
  assert.match(row("key-b"), /data-label="Pool share" class="pools">—</);
});
