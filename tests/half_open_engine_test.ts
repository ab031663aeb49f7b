/**
 * Half-open recovery (docs/design.md "Cooldown") in virtual time: when an upstream's pause
 * ends, exactly one request probes it while the others go to the next candidate; success
 * closes it, failure pauses it again for the doubled pause; a probe that ends with no word on
 * the upstream's health, or never gets to call it (its client left while the store decided, no
 * slot was free), is given back; one whose hop never ends holds it only until its claim runs out.
 */
import assert from "node:assert/strict";
import { ANSWERED } from "../gateway/forward/hop_ending.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import { clientDisconnected } from "../gateway/forward/stop_reasons.ts";
import type { ProbeStore } from "../gateway/route/cooldown.ts";
import { type Act, answersAfter, countOf, failsWith, fleet } from "./pool_kit.ts";

const PAUSE_MS = 60_000;

/** A route a → b whose `a` is paused by three failures, then left until its pause is over. */
async function pausedThenOver(
  play: (id: string, n: number) => Act,
  opts: {
    candidates?: Parameters<typeof fleet>[0]["candidates"];
    probes?: ProbeStore;
    maxInFlight?: number;
  } = {},
) {
  const f = fleet({
    upstreams: [{ id: "a", max_in_flight: opts.maxInFlight }, { id: "b" }],
    candidates: opts.candidates ??
      [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
  }, { play, probes: opts.probes });
  for (let i = 0; i < 3; i++) f.deps.cooldowns.failure("a", "gw.upstream.error");
  assert.equal(f.deps.cooldowns.phase("a"), "paused");
  await f.clock.run(f.clock.sleep(PAUSE_MS));
  assert.equal(f.deps.cooldowns.phase("a"), "probing");
  assert.equal(f.deps.cooldowns.halfOpen("a"), true);
  return f;
}

const burst = (f: ReturnType<typeof fleet>, n: number) =>
  f.clock.run(Promise.all(Array.from({ length: n }, () => f.request())));

Deno.test("half-open: at the end of a pause exactly one request probes; the others go on; success closes it", async () => {
  const f = await pausedThenOver((id) => answersAfter(id === "a" ? 2_000 : 10));
  let during = "";
  f.clock.after(1_000, () => (during = f.deps.cooldowns.phase("a")));
  const all = await burst(f, 10);
  assert.ok(all.every((r) => r.error === null));
  assert.equal(f.calls.get("a"), 1, "one probe reached the recovering upstream");
  assert.equal(f.calls.get("b"), 9);
  assert.equal(during, "probing");
  assert.equal(f.deps.cooldowns.phase("a"), "ok");
  assert.equal(f.metrics.probes.get({ upstream: "a", result: "ok" }), 1);
  // Closed: it is the route's first candidate again.
  assert.deepEqual(new Set(await f.sequence(5)), new Set(["a"]));
});

Deno.test("half-open: a failed probe is not retried and pauses the upstream again for the doubled pause", async () => {
  let aUp = false;
  const f = await pausedThenOver((id) =>
    id === "a" && !aUp ? failsWith(503) : answersAfter(id === "a" ? 2_000 : 10)
  );
  const failedAt = f.clock.now(); // the probe fails at once
  const all = await burst(f, 5);
  assert.ok(all.every((r) => r.error === null));
  // retries_per_candidate is 1, yet the probe's 503 went straight to the next candidate.
  assert.equal(f.calls.get("a"), 1);
  const probe = all.find((r) => r.hops[0] === "a")!;
  assert.deepEqual(probe.hops, ["a", "b"]);
  const s = f.deps.cooldowns.get("a");
  assert.equal(s.pausedUntil! - failedAt, 2 * PAUSE_MS);
  assert.match(s.reason!, /the probe after a pause failed/);
  assert.equal(f.metrics.probes.get({ upstream: "a", result: "failed" }), 1);

  // After the doubled pause: again exactly one probe, which now succeeds.
  await f.clock.run(f.clock.sleep(2 * PAUSE_MS));
  aUp = true;
  await burst(f, 5);
  assert.equal(f.calls.get("a"), 2);
  assert.equal(f.deps.cooldowns.phase("a"), "ok");
});

Deno.test("half-open: a probe that says nothing of the upstream's health is given back", async () => {
  const rejected: Act = {
    end: { how: "rejected", error: upstreamStatusError(400, { kind: "openai-chat" }) },
  };
  const f = await pausedThenOver((id, n) =>
    id === "a" ? (n === 0 ? rejected : answersAfter(10)) : answersAfter(10)
  );
  const first = await f.one();
  assert.equal(first.error?.status, 400, "the caller's own error, passed back");
  assert.equal(f.metrics.probes.get({ upstream: "a", result: "released" }), 1);
  assert.equal(f.deps.cooldowns.halfOpen("a"), true, "still to be probed");
  const second = await f.one();
  assert.deepEqual(second.hops, ["a"]);
  assert.equal(f.deps.cooldowns.phase("a"), "ok");

  // A probe whose client leaves: given back too.
  const g = await pausedThenOver((id) => id === "a" ? { end: "silent" } : answersAfter(10));
  const leaving = new AbortController();
  g.clock.after(1_000, () => leaving.abort(clientDisconnected()));
  const gone = await g.clock.run(g.request({ signal: leaving.signal }));
  assert.equal(gone.error?.code, "gw.client.disconnected");
  assert.equal(g.deps.cooldowns.halfOpen("a"), true);
  assert.equal(g.calls.get("a"), 1);
});

Deno.test("half-open: one probe for a pool's member too; the pool's other members take the rest", async () => {
  const f = await pausedThenOver((id) => answersAfter(id === "a" ? 2_000 : 10), {
    candidates: [{ pool: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }] }],
  });
  const all = await burst(f, 10);
  assert.ok(all.every((r) => r.error === null));
  assert.equal(f.calls.get("a"), 1);
  assert.equal(countOf(all.map((r) => r.hops[0]), "b"), 9);
});

Deno.test("half-open: with no other candidate healthy, requests go to it as before", async () => {
  const f = fleet({
    upstreams: [{ id: "a" }],
    candidates: [{ upstream: "a", model: "m" }],
  }, { play: () => answersAfter(2_000) });
  for (let i = 0; i < 3; i++) f.deps.cooldowns.failure("a");
  await f.clock.run(f.clock.sleep(PAUSE_MS));
  const all = await burst(f, 4);
  assert.ok(all.every((r) => r.error === null));
  assert.equal(f.calls.get("a"), 4, "a single candidate ignores cooldown");
  assert.equal(f.deps.cooldowns.phase("a"), "ok");
  // A failure while half-open pauses it at once, for the doubled pause, probe or not.
  const g = fleet({ upstreams: [{ id: "a" }], candidates: [{ upstream: "a", model: "m" }] }, {
    play: () => ({ end: ANSWERED }),
  });
  for (let i = 0; i < 3; i++) g.deps.cooldowns.failure("a");
  await g.clock.run(g.clock.sleep(PAUSE_MS));
  g.deps.cooldowns.failure("a");
  assert.equal(g.deps.cooldowns.get("a").pausedUntil! - g.clock.now(), 2 * PAUSE_MS);
});

Deno.test("half-open: the shared store decides between instances; the loser goes on to the next candidate", async () => {
  // Two processes' cooldowns over one store: its claim is the database's conditional write.
  let stored: { probeUntil: number | null } = { probeUntil: null };
  const probes = {
    claim: ({ until, now }: { until: number; now: number }) => {
      if (stored.probeUntil !== null && stored.probeUntil > now) {
        return Promise.resolve({
          upstream: "a",
          model: null,
          consecutiveFailures: 0,
          pauseCount: 1,
          pausedUntil: now - 1,
          reason: null,
          probeUntil: stored.probeUntil,
          updatedAt: now,
        });
      }
      stored = { probeUntil: until };
      return Promise.resolve("claimed" as const);
    },
    release: () => (stored = { probeUntil: null }),
  };
  const play = (id: string) => answersAfter(id === "a" ? 2_000 : 10);
  const one = fleet({
    upstreams: [{ id: "a" }, { id: "b" }],
    candidates: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
  }, { play, probes });
  const two = fleet({
    upstreams: [{ id: "a" }, { id: "b" }],
    candidates: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
  }, { play, probes, clock: one.clock });
  for (const f of [one, two]) {
    for (let i = 0; i < 3; i++) f.deps.cooldowns.failure("a");
  }
  await one.clock.run(one.clock.sleep(PAUSE_MS));
  const all = await one.clock.run(
    Promise.all([
      ...Array.from({ length: 5 }, () => one.request()),
      ...Array.from({ length: 5 }, () => two.request()),
    ]),
  );
  assert.ok(all.every((r) => r.error === null));
  assert.equal((one.calls.get("a") ?? 0) + (two.calls.get("a") ?? 0), 1);
  assert.equal((one.calls.get("b") ?? 0) + (two.calls.get("b") ?? 0), 9);
});

Deno.test("half-open: a probe whose hop never ends, even when stopped, frees the upstream when its claim runs out", async () => {
  // The claim lasts what its hop may wait for a slot and go without content: 5 s + 30 s. (Other
  // models, so the slot the stuck hop keeps does not put `b` first as the less loaded of equals.)
  const f = fleet({
    upstreams: [{ id: "a" }, { id: "b" }],
    candidates: [{ upstream: "a", model: "ma" }, { upstream: "b", model: "mb" }],
    failover: { idle_timeout_secs: 30, slot_wait_secs: 5 },
  }, { play: (id, n) => id === "a" && n === 0 ? { end: "stuck" } : answersAfter(10) });
  for (let i = 0; i < 3; i++) f.deps.cooldowns.failure("a", "gw.upstream.error");
  await f.clock.run(f.clock.sleep(PAUSE_MS));
  void f.request(); // the probe: its hop is never given back
  await f.clock.run(f.clock.sleep(34_000));
  assert.equal(f.calls.get("a"), 1);
  assert.deepEqual((await f.one()).hops, ["b"], "34 s on, the probe is still out");
  await f.clock.run(f.clock.sleep(2_000));
  assert.deepEqual((await f.one()).hops, ["a"], "36 s on, the next request probes");
  assert.equal(f.deps.cooldowns.phase("a"), "ok");
});

Deno.test("half-open: a probe given back before its call: the client left while the store decided, or no slot was free", async () => {
  const released: string[] = [];
  let clock: { sleep(ms: number): Promise<void> } | null = null;
  const probes = {
    claim: async () => {
      await clock!.sleep(500); // a slow database
      return "claimed" as const;
    },
    release: (ticket: { upstream: string }) => void released.push(ticket.upstream),
  };
  const f = await pausedThenOver(() => answersAfter(10), { probes });
  clock = f.clock;
  const leaving = new AbortController();
  f.clock.after(100, () => leaving.abort(clientDisconnected()));
  const gone = await f.clock.run(f.request({ signal: leaving.signal }));
  assert.equal(gone.error?.code, "gw.client.disconnected");
  assert.deepEqual(released, ["a"], "given back in the store too");
  assert.equal(f.deps.cooldowns.halfOpen("a"), true);
  assert.equal(f.calls.get("a"), undefined);

  // Its slots held by streams that began before the pause: each request that claims the probe
  // gives it back at once and goes on; none waits, and the first after a slot frees probes.
  // (Other models: as the less loaded of equals, `b` would go first and `a` never be reached.)
  const g = await pausedThenOver(() => answersAfter(10), {
    maxInFlight: 1,
    candidates: [{ upstream: "a", model: "ma" }, { upstream: "b", model: "mb" }],
  });
  const busy = g.deps.slots.tryAcquire("a", 1, { key: null })!;
  const all = await burst(g, 5);
  assert.deepEqual(all.map((r) => r.hops), Array(5).fill(["b"]));
  assert.equal(g.metrics.probes.get({ upstream: "a", result: "released" }), 0, "no call, no hop");
  assert.equal(g.deps.cooldowns.halfOpen("a"), true);
  busy();
  assert.deepEqual((await g.one()).hops, ["a"]);
  assert.equal(g.deps.cooldowns.phase("a"), "ok");
});
