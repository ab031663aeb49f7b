import assert from "node:assert/strict";
import { Metrics } from "./metrics.ts";

/** The sample lines of one metric family, by their name and labels. */
function samples(text: string, family: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith(family)) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

Deno.test("histogram buckets are cumulative, a bound counts as inside, and each label set is its own series", () => {
  const m = new Metrics();
  for (const s of [0.005, 0.03, 0.03, 400]) m.duration.observe({ route: "a" }, s);
  m.duration.observe({ route: "b" }, 2);
  const got = samples(m.render(), "pulsegate_request_duration_seconds");
  const a = (le: string) =>
    got.get(`pulsegate_request_duration_seconds_bucket{route="a",le="${le}"}`);
  assert.equal(a("0.005"), 1);
  assert.equal(a("0.025"), 1);
  assert.equal(a("0.05"), 3);
  assert.equal(a("300"), 3);
  assert.equal(a("+Inf"), 4);
  assert.equal(got.get(`pulsegate_request_duration_seconds_count{route="a"}`), 4);
  assert.equal(got.get(`pulsegate_request_duration_seconds_sum{route="a"}`), 400.065);
  assert.equal(
    got.get(`pulsegate_request_duration_seconds_bucket{route="b",le="1"}`),
    0,
  );
  assert.equal(got.get(`pulsegate_request_duration_seconds_bucket{route="b",le="2.5"}`), 1);
  assert.deepEqual(m.duration.get({ route: "a" }), { count: 4, sum: 400.065 });
});

Deno.test("counters: label values are escaped, and sets that differ by name or value never share a series", () => {
  const m = new Metrics();
  m.requests.inc({ route: 'say "hi"\\\n', outcome: "ok" });
  m.requests.inc({ route: "x", outcome: "ok" }, 2);
  m.requests.inc({ route: "x", outcome: "ok" });
  // The same values under other names are another series.
  m.attempts.inc({ upstream: "x", outcome: "ok" });
  m.attempts.inc({ route: "x", outcome: "ok" });
  const text = m.render();
  const requests = samples(text, "pulsegate_requests_total");
  assert.equal(
    requests.get(`pulsegate_requests_total{route="say \\"hi\\"\\\\\\n",outcome="ok"}`),
    1,
  );
  assert.equal(requests.get(`pulsegate_requests_total{route="x",outcome="ok"}`), 3);
  assert.equal(m.requests.get({ route: "x", outcome: "ok" }), 3);
  const attempts = samples(text, "pulsegate_attempts_total");
  assert.equal(attempts.get(`pulsegate_attempts_total{upstream="x",outcome="ok"}`), 1);
  assert.equal(attempts.get(`pulsegate_attempts_total{route="x",outcome="ok"}`), 1);
  assert.equal(
    samples(text, "pulsegate_client_disconnects_total").get(
      "pulsegate_client_disconnects_total",
    ),
    0,
  );
});

Deno.test("label sets are told apart by each name and value, whatever characters a value holds", () => {
  const m = new Metrics();
  // A value that spells another set's names and values: its own series all the same.
  m.tokens.inc({ upstream: "x", direction: "input" }, 1);
  m.tokens.inc({ upstream: "x\u0001direction\u0000input" }, 5);
  assert.equal(m.tokens.get({ upstream: "x", direction: "input" }), 1);
  assert.equal(m.tokens.get({ upstream: "x\u0001direction\u0000input" }), 5);
});

Deno.test("label sets past the cache's bound are still counted apart and rendered", () => {
  const m = new Metrics();
  for (let i = 0; i < 50_000; i++) m.keyInFlight.inc({ key: `k${i}` }, 1);
  m.keyInFlight.inc({ key: "k49999" }, 1);
  assert.equal(m.keyInFlight.get({ key: "k49999" }), 2);
  assert.equal(m.keyInFlight.get({ key: "k0" }), 1);
  assert.match(m.render(), /key="k49999"\} 2/);
});
