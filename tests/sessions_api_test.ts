/** GET /admin/api/sessions (docs/admin.md "Sessions"): what the Sessions panel reads. */
import assert from "node:assert/strict";
import type { SessionsView } from "../admin/sessions_types.ts";
import { ADMIN, adminFetch } from "./admin_helpers.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { postJson, withGateway } from "./harness.ts";

Deno.test("sessions API: per key and session, tokens, hit rate, cost, budget use; bad queries 400", async () => {
  await withGateway(async (gw, [up]) => {
    up!.setHandler(() => ({
      headers: { "content-type": "application/json" },
      body: [{
        send: anthropicFake.wholeBody({
          text: ["ok"],
          usage: { input: 100, output: 10, cacheRead: 300, cacheWrite: 600 },
        }),
      }],
    }));
    const ask = (headers: Record<string, string>, system?: string) =>
      postJson(`${gw.url}/v1/messages`, {
        model: "smart",
        max_tokens: 10,
        ...(system ? { system } : {}),
        messages: [{ role: "user", content: "hi" }],
      }, { "x-api-key": "sk-a", ...headers }).then((res) => res.text());
    await ask({ "x-session-id": "s1" });
    await ask({ "x-session-id": "s1" });
    await ask({}, "You are an agent."); // no session named: one from the prompt
    await gw.writer.flush();

    const res = await adminFetch(gw, "/admin/api/sessions");
    assert.equal(res.status, 200);
    const view: SessionsView = await res.json();
    const named = view.sessions.find((s) => s.sessionId === "s1")!;
    assert.equal(named.keyId, "a");
    assert.equal(named.derived, false);
    assert.equal(named.requests, 2);
    assert.deepEqual([named.routes, named.upstreams], [["smart"], ["up1"]]);
    assert.deepEqual([named.inputTokens, named.cachedTokens, named.cacheWriteTokens], [
      2000,
      600,
      1200,
    ]);
    assert.equal(named.cacheHitRate, 0.3);
    // 100 x 3 + 300 x 0.3 + 600 x 3.75 + 10 x 15 per request, per million.
    assert.ok(Math.abs(named.costUsd! - 2 * (300 + 90 + 2250 + 150) / 1e6) < 1e-12);
    assert.deepEqual(named.budget, {
      limits: { requests: 10 },
      use: { requests: 2, tokens: 2 * 1010, costUsd: named.costUsd },
    });
    const derived = view.sessions.find((s) => s.derived)!;
    assert.match(derived.sessionId, /^p:[0-9a-f]{16}$/);
    assert.equal(derived.requests, 1);

    for (const query of ["since=yesterday", "limit=0", "limit=abc"]) {
      const bad = await adminFetch(gw, `/admin/api/sessions?${query}`);
      assert.equal(bad.status, 400, query);
      assert.equal((await bad.json()).error.code, "admin.bad_query");
    }
    const refused = await adminFetch(gw, "/admin/api/sessions", { token: "wrong" });
    assert.equal(refused.status, 401);
    await refused.body?.cancel();
  }, {
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN, KEY_A: "sk-a" },
    config: ([url]) => ({
      upstreams: [{
        id: "up1",
        kind: "anthropic",
        base_url: url!,
        prices: { "claude-sonnet-4-5": { input: 3, output: 15 } },
      }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "claude-sonnet-4-5" }] }],
      keys: [{ id: "a", key_env: "KEY_A", session_budget: { requests: 10 } }],
    }),
  });
});
