import assert from "node:assert/strict";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { validateConfig } from "../gateway/config/validate.ts";
import { billingFor, hopCost, ratesFor } from "../gateway/live/billing.ts";
import { LiveRequest } from "../gateway/live/live_request.ts";
import { systemClock } from "../gateway/runtime/clock.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import { budgetPeriod, slidingUse } from "../gateway/policy/usage_windows.ts";

const PRICE = { input: 3, output: 15, cached_input: 0.3 };

Deno.test("hopCost: cached input at cached_input, the rest at input, output at output", () => {
  const chat = (price: typeof PRICE | { input: number; output: number }) =>
    ratesFor(price, { kind: "openai-chat", model: "m" });
  const usd = hopCost(chat(PRICE), { input: 1_000_000, output: 100_000, cached: 400_000 })?.usd;
  assert.ok(Math.abs(usd! - (0.6 * 3 + 0.4 * 0.3 + 0.1 * 15)) < 1e-12);
  // Without cached_input, an OpenAI upstream's cached tokens cost as input.
  const plain = hopCost(chat({ input: 3, output: 15 }), {
    input: 1_000_000,
    output: 0,
    cached: 400_000,
  });
  assert.deepEqual(plain, { usd: 3, cacheWriteUsd: 0 });
  assert.equal(hopCost(undefined, { input: 10, output: 10, cached: null }), null);
  assert.deepEqual(hopCost(chat(PRICE), { input: null, output: null, cached: null }), {
    usd: 0,
    cacheWriteUsd: 0,
  });
});

function config() {
  const checked = validateConfig({
    upstreams: [
      { id: "a", kind: "openai-chat", prices: { "m-a": PRICE } },
      { id: "b", kind: "anthropic", prices: { "m-b": { input: 1, output: 2 } } },
      { id: "c", kind: "gemini" },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "a", model: "m-a" }, { upstream: "b", model: "m-b" }],
    }],
  });
  assert.ok(checked.ok);
  return checked.config;
}

Deno.test("a failed-over request costs the sum of every hop that billed", () => {
  const requests: RequestRecord[] = [];
  const attempts: AttemptRecord[] = [];
  const metrics = new Metrics();
  const live = new LiveRequest({
    id: "r1",
    instanceId: "i",
    clientFormat: "openai-chat",
    route: "smart",
    stream: true,
    keyId: "k",
    sessionId: null,
  }, {
    clock: systemClock(),
    // Records are handed over live (gateway/live/live_request.ts `HistorySink`): keep each
    // version as it was written.
    sink: {
      writeRequest: (r) => requests.push({ ...r }),
      writeAttempt: (a) => attempts.push({ ...a }),
    },
    metrics,
  });
  const billed: { tokens: number; costUsd: number | null }[] = [];
  live.billWith(billingFor(config(), { onBilled: (b) => billed.push(b) }));
  live.routed("smart");
  const first = live.startAttempt("a", "m-a");
  first.usage({ inputTokens: 1_000_000, cachedTokens: 1_000_000, outputTokens: 0 });
  first.end("idle_timeout", new GatewayError("slow", { code: "gw.upstream.idle_timeout" }));
  const second = live.startAttempt("b", "m-b");
  second.usage({ inputTokens: 1_000_000, outputTokens: 1_000_000 });
  second.end("success");
  const unpriced = live.startAttempt("c", "m-c");
  unpriced.end("error");
  live.finish({ status: 200 });
  const ended = attempts.filter((a) => a.outcome !== null);
  assert.deepEqual(ended.map((a) => a.costUsd), [0.3, 3, null]);
  assert.equal(requests.at(-1)?.costUsd, 3.3);
  assert.deepEqual(billed, [{ tokens: 1_000_000, costUsd: 0.3 }, {
    tokens: 2_000_000,
    costUsd: 3,
  }]);
  assert.equal(metrics.cost.get({ route: "smart", upstream: "a" }), 0.3);
  assert.equal(metrics.cost.get({ route: "smart", upstream: "b" }), 3);
});

Deno.test("slidingUse: the window frees when its oldest seconds leave it", () => {
  const now = 1_000_000;
  const buckets = [
    { start: now - 70_000, value: 5 }, // outside the 60 s window
    { start: now - 50_000, value: 1 },
    { start: now - 20_000, value: 1 },
  ];
  assert.deepEqual(slidingUse(buckets, { now, limit: 3 }), { used: 2, freesAt: null });
  assert.deepEqual(slidingUse(buckets, { now, limit: 2 }), { used: 2, freesAt: now + 10_000 });
  assert.deepEqual(slidingUse(buckets, { now, limit: 1 }), { used: 2, freesAt: now + 40_000 });
});

Deno.test("budgetPeriod: UTC day and calendar month", () => {
  const at = Date.UTC(2026, 1, 28, 13, 5); // 28 February 2026
  assert.deepEqual(budgetPeriod("day", at), {
    from: Date.UTC(2026, 1, 28),
    to: Date.UTC(2026, 2, 1),
  });
  assert.deepEqual(budgetPeriod("month", Date.UTC(2026, 11, 31, 23)), {
    from: Date.UTC(2026, 11, 1),
    to: Date.UTC(2027, 0, 1),
  });
});

Deno.test("config: prices and key limits are validated with clear messages", () => {
  const checked = validateConfig({
    upstreams: [{ id: "a", kind: "openai-chat", prices: { m: { input: -1, output: 1 } } }],
    routes: [{ model: "smart", candidates: [{ upstream: "a", model: "m" }] }],
    keys: [{ id: "k", key_env: "K", rpm: 0, budget: { usd: 5, period: "week" } }],
  });
  assert.ok(!checked.ok);
  const paths = checked.problems.map((p) => `${p.path}: ${p.message}`).join("\n");
  assert.match(paths, /upstreams\.0\.prices\.m\.input.*0 or more/);
  assert.match(paths, /keys\.0\.rpm.*at least 1/);
  assert.match(paths, /keys\.0\.budget\.period.*"day" or "month"/);
});
