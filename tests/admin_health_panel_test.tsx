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

Deno.test("health panel: state, error rate, content tokens/s, and each model's own state and pool share", async () => {
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
  const cooldown = {
    paused: false,
    pausedUntil: null,
    pauseReason: null,
    consecutiveFailures: 0,
    pauseCount: 1,
  };
  const upstream = { kind: "openai-chat", enabled: true, inFlight: 0, maxInFlight: 64, recent };
  const share = { route: "smart", index: 0, pick: "cheapest", weight: 3, window: 200 };
  const view: HealthView = {
    at: 0,
    demo: false,
    history: null,
    upstreams: [
      {
        ...upstream,
        ...cooldown,
        id: "key-a",
        state: "ok",
        members: [
          {
            ...cooldown,
            model: "cheap",
            state: "paused",
            paused: true,
            pausedUntil: 60_000,
            pauseReason: "3 failures in a row; last: gw.upstream.error",
            recent: { ...recent, attempts: 3, successes: 0, failures: 3, errorRate: 1 },
            pools: [{ ...share, model: "cheap", share: 0.26 }],
          },
          {
            ...cooldown,
            model: "dear",
            state: "ok",
            recent,
            pools: [{ ...share, model: "dear", share: 0.74 }],
          },
        ],
      },
      { ...upstream, ...cooldown, id: "key-b", state: "probing", members: [] },
    ],
  };
  const health = createHealth(
    { health: () => Promise.resolve(view) } as Partial<AdminApi> as AdminApi,
  );
  await health.refresh();
  const html = renderToString(<UpstreamHealth health={health} />);
  const row = (id: string) => html.match(new RegExp(`data-upstream="${id}".*?</tr>`))?.[0] ?? "";
  const member = (id: string) =>
    html.match(new RegExp(`<tr[^>]*data-member="${id}".*?</tr>`))?.[0] ?? "";
  assert.match(row("key-a"), /1 failed \(25\u00a0%\)/);
  assert.match(row("key-a"), /Content tokens\/s">87<small>median/);
  assert.match(row("key-a"), /class="state ok"/);
  // A model paused alone: its upstream is ok, the upstream's Resume clears it.
  assert.match(row("key-a"), /aria-label="Resume key-a"/);
  assert.match(member("key-a/cheap"), /class="member paused"/);
  assert.match(member("key-a/cheap"), /class="state paused">paused until/);
  assert.match(member("key-a/cheap"), /3 failures in a row; last: gw.upstream.error/);
  assert.match(member("key-a/cheap"), /3 failed \(100\u00a0%\)/);
  assert.match(member("key-a/cheap"), /26\u00a0%.*of smart pool 1 \(cheapest, weight 3.*last 200/);
  assert.match(member("key-a/dear"), /class="state ok"/);
  assert.match(member("key-a/dear"), /74\u00a0%.*of smart pool 1/);
  assert.match(row("key-b"), /class="state probing"[^>]*>probing</);
  assert.doesNotMatch(row("key-b"), /Resume/);
  assert.doesNotMatch(html, /data-member="key-b\//);
});
