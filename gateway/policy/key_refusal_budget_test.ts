import assert from "node:assert/strict";
import { KeyRefusalBudget } from "./key_refusal_budget.ts";
import { clientDisconnected } from "../forward/stop_reasons.ts";
import { LiveRequest } from "../live/live_request.ts";
import { systemClock } from "../runtime/clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { Metrics } from "../runtime/metrics.ts";

/** docs/security.md "Refused floods": each key's budget of recorded refusals after auth. */

Deno.test("key refusal budget: a minute per key, places given back when a request reaches an upstream", () => {
  let now = 1_000_000;
  const budget = new KeyRefusalBudget({ now: () => now }, { perMinute: 2, maxKeys: 3 });
  const [a1, a2, a3] = [budget.reserve("a"), budget.reserve("a"), budget.reserve("a")];
  assert.deepEqual([a1.held, a2.held, a3.held], [true, true, false]);
  assert.equal(budget.reserve("b").held, true, "another key's flood spends nothing of b's");
  assert.equal(a3.claim(), false, "a's minute is spent");
  a1.release(); // a1 reached an upstream: not a refusal
  assert.equal(a3.claim(), true, "the place a1 gave back");
  assert.equal(budget.reserve("a").claim(), false);
  now += 60_000;
  a2.release(); // a place of the last minute is not this minute's
  const fresh = [budget.reserve("a"), budget.reserve("a"), budget.reserve("a")];
  assert.deepEqual(fresh.map((s) => s.held), [true, true, false], "a new minute, a new budget");
});

Deno.test("key refusal budget: keys beyond its bound share one allowance; quiet keys are forgotten", () => {
  let now = 1_000_000;
  const budget = new KeyRefusalBudget({ now: () => now }, { perMinute: 2, maxKeys: 3 });
  const many = Array.from({ length: 1_000 }, (_, i) => budget.reserve(`k${i}`));
  assert.equal(budget.size, 3, "the table stays at its bound");
  assert.deepEqual(many.slice(0, 3).map((s) => s.held), [true, true, true], "each its own");
  assert.equal(many.slice(3).filter((s) => s.held).length, 2, "the rest share one allowance");
  now += 60_000;
  assert.equal(budget.reserve("new").held, true);
  assert.equal(budget.size, 1, "keys whose minute is over are forgotten");
});

Deno.test("with its key's budget spent: a refusal gets no row, a caller who left or a hop does", () => {
  const budget = new KeyRefusalBudget({ now: () => 1_000_000 }, { perMinute: 1 });
  budget.reserve("k").claim(); // the minute's one place, spent by an earlier refusal
  const rows: { id: string; state: string; expendable: boolean }[] = [];
  const metrics = new Metrics();
  const start = (id: string) =>
    new LiveRequest({
      id,
      instanceId: "i",
      clientFormat: "openai-chat",
      route: "smart",
      stream: false,
      keyId: "k",
      sessionId: null,
    }, {
      clock: systemClock(),
      sink: {
        writeRequest: (r, opts) =>
          rows.push({ id: r.id, state: r.state, expendable: opts?.expendable ?? false }),
        writeAttempt: () => {},
      },
      metrics,
      refusal: budget.reserve("k"),
    });
  start("refused").finish({
    status: 429,
    error: new GatewayError("over", { code: "gw.key.rate_limited" }),
  });
  start("left").finish({ status: 499, error: clientDisconnected() });
  const served = start("served");
  served.startAttempt("up1", "m").end("success");
  served.finish({ status: 200 });
  assert.deepEqual(rows, [
    { id: "left", state: "closed", expendable: true },
    { id: "served", state: "open", expendable: false },
    { id: "served", state: "closed", expendable: false },
  ]);
  assert.equal(metrics.keyRefusalsUnrecorded.get(), 1);
  assert.equal(metrics.requests.get({ route: "unknown", outcome: "error" }), 2, "all counted");
});
