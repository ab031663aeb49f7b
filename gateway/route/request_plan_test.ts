import assert from "node:assert/strict";
import { validateConfig } from "../config/validate.ts";
import type { Config } from "../config/schema.ts";
import { planOf, requestPlan } from "./request_plan.ts";

function config(raw: unknown): Config {
  const result = validateConfig(raw);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

const UPSTREAMS = [
  { id: "a", kind: "openai-chat" },
  { id: "b", kind: "openai-chat" },
  { id: "off", kind: "openai-chat", enabled: false },
];

Deno.test("a plan is made once per config object and again for a new one", () => {
  const raw = {
    upstreams: UPSTREAMS,
    routes: [{ model: "r", candidates: [{ upstream: "a", model: "m" }] }],
  };
  const first = config(raw);
  assert.equal(requestPlan(first), requestPlan(first));
  const second = config(raw);
  assert.notEqual(requestPlan(second), requestPlan(first));
  assert.equal(requestPlan(second).routes.get("r"), second.routes[0]);
});

Deno.test("routes by name: enabled ones only, the first of a name", () => {
  const c = config({
    upstreams: UPSTREAMS,
    routes: [
      { model: "off", enabled: false, candidates: [{ upstream: "a", model: "m" }] },
      { model: "on", candidates: [{ upstream: "a", model: "m" }] },
    ],
  });
  const { routes } = requestPlan(c);
  assert.equal(routes.get("off"), undefined);
  assert.equal(routes.get("on"), c.routes[1]);
  assert.deepEqual([...routes.keys()], ["on"]);
});

Deno.test("a route without a pool has its enabled candidates with their upstreams, in order", () => {
  const c = config({
    upstreams: UPSTREAMS,
    routes: [{
      model: "r",
      candidates: [
        { upstream: "b", model: "m1" },
        { upstream: "a", model: "m2", enabled: false },
        { upstream: "off", model: "m3" },
        { upstream: "a", model: "m4" },
      ],
    }],
  });
  const plan = planOf(c, c.routes[0]!);
  assert.deepEqual(
    plan.fixed?.map((t) => [t.upstream.id, t.candidate.model]),
    [["b", "m1"], ["a", "m4"]],
  );
  assert.equal(plan.fixed?.[0]?.upstream, c.upstreams[1]);
  assert.equal(plan.hedges, false);
});

Deno.test("a route with a pool orders its members per request: no fixed list", () => {
  const c = config({
    upstreams: UPSTREAMS,
    routes: [{
      model: "r",
      candidates: [{ upstream: "a", model: "m" }, { pool: [{ upstream: "b", model: "m" }] }],
    }],
  });
  assert.equal(planOf(c, c.routes[0]!).fixed, null);
});

Deno.test("a route hedges when it or any candidate or pool member sets hedge_after_secs", () => {
  const route = (extra: Record<string, unknown>, candidate: Record<string, unknown> = {}) => ({
    model: "r",
    ...extra,
    candidates: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m", ...candidate }],
  });
  const hedges = (r: Record<string, unknown>) => {
    const c = config({ upstreams: UPSTREAMS, routes: [r] });
    return planOf(c, c.routes[0]!).hedges;
  };
  assert.equal(hedges(route({})), false);
  assert.equal(hedges(route({ hedge_after_secs: 2 })), true);
  assert.equal(hedges(route({}, { hedge_after_secs: 2 })), true);
  assert.equal(
    hedges({
      model: "r",
      candidates: [{
        pool: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m", hedge_after_secs: 1 }],
      }],
    }),
    true,
  );
});

Deno.test("a route object of another config still gets its plan", () => {
  const raw = {
    upstreams: UPSTREAMS,
    routes: [{ model: "r", candidates: [{ upstream: "a", model: "m" }] }],
  };
  const c = config(raw);
  const other = config(raw);
  const plan = planOf(c, other.routes[0]!);
  assert.deepEqual(plan.fixed?.map((t) => t.upstream.id), ["a"]);
});
