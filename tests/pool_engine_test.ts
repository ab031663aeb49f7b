/**
 * Pools (docs/design.md "Pools") in virtual time: the picks' statistics over many requests, how
 * a pool's members fail over into the route's next entry, sessions staying on their member.
 */
import assert from "node:assert/strict";
import { answersAfter, countOf, failsWith, fleet } from "./pool_kit.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";

const upstreams = (...ids: string[]) => ids.map((id) => ({ id }));

Deno.test("pool weighted 3:1: 1,000 requests land within ±5 % of 75 / 25, on every seed", () => {
  const shares: number[] = [];
  return (async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const f = fleet({
        upstreams: upstreams("a", "b"),
        candidates: [{
          pool: [{ upstream: "a", model: "m", weight: 3 }, { upstream: "b", model: "m" }],
        }],
      }, { seed, play: () => answersAfter(10) });
      const firsts = await f.sequence(1000);
      const share = countOf(firsts, "a") / 1000;
      shares.push(share);
      assert.ok(Math.abs(share - 0.75) <= 0.05, `seed ${seed}: a took ${share}`);
      assert.equal(countOf(firsts, "a") + countOf(firsts, "b"), 1000);
      // The share the admin page and /metrics show: the pool's last 200 attempts.
      const view = f.deps.pools.view(f.deps.config)[0]!;
      assert.equal(view.window, 200);
      assert.ok(
        Math.abs(view.members[0]!.share! - 0.75) <= 0.1,
        `window ${view.members[0]!.share}`,
      );
    }
    console.log(`weighted 3:1, a's share over 1,000 requests by seed: ${shares.join(", ")}`);
  })();
});

Deno.test("pool least_latency: traffic leaves a member ten times slower within 50 requests and comes back within 50 after it recovers", async () => {
  let bSlow = false;
  const f = fleet({
    upstreams: upstreams("a", "b"),
    candidates: [{
      pick: "least_latency",
      pool: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
    }],
  }, { play: (id) => answersAfter(id === "b" && bSlow ? 3000 : 300) });
  const even = await f.sequence(200);
  const before = countOf(even, "b") / 200;
  assert.ok(before >= 0.4 && before <= 0.6, `equal members share: b took ${before}`);

  bSlow = true;
  const slow = await f.sequence(250);
  // Within 50 requests: from the 51st on, b gets only the exploration share.
  const after = countOf(slow.slice(50), "b") / 200;
  const movedOff = 1 - after / before;
  assert.ok(after <= 0.1, `b still took ${after} of the traffic`);
  assert.ok(movedOff >= 0.9, `only ${movedOff} of b's traffic moved off`);
  const first50 = countOf(slow.slice(0, 50), "b");
  assert.ok(first50 <= 5, `b took ${first50} of the first 50`);

  bSlow = false;
  const back = await f.sequence(250);
  const returned = back.indexOf("b");
  assert.ok(returned >= 0 && returned < 50, `b first tried again at request ${returned}`);
  const regained = countOf(back.slice(50), "b") / 200;
  assert.ok(regained >= 0.4, `b took only ${regained} after it recovered`);
  console.log(
    `least_latency: b's share ${before} while equal; after it slowed 10x it took ${first50} of ` +
      `the next 50 requests and ${after} of requests 51-250 (${(movedOff * 100).toFixed(1)} % ` +
      `of its traffic moved off); after it recovered it was measured again at request ` +
      `${returned + 1}, took ${countOf(back.slice(0, 50), "b")} of the first 50 and ${regained} ` +
      `of requests 51-250`,
  );
});

Deno.test("pool least_latency: content tokens per second count beside first content", async () => {
  const f = fleet({
    upstreams: upstreams("a", "b"),
    candidates: [{
      pick: "least_latency",
      pool: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
    }],
  }, {
    // Same first content; b streams 100 tokens in 10 s (10/s), a in 1 s (100/s).
    play: (id) => answersAfter(200, { stream: id === "b" ? 10_000 : 1_000, tokens: 100 }),
  });
  const firsts = await f.sequence(200);
  assert.ok(countOf(firsts.slice(50), "b") / 150 <= 0.1, `b took ${countOf(firsts, "b")}`);
  const b = f.deps.pools.view(f.deps.config)[0]!.members[1]!;
  assert.ok(Math.abs(b.tokensPerSec! - 10) < 0.5, `b's rate ${b.tokensPerSec}`);
  assert.equal(f.metrics.upstreamContentRate.get({ upstream: "b" }).count, countOf(firsts, "b"));
});

Deno.test("pool least_busy: requests at once spread by the share of max_in_flight in use", async () => {
  const f = fleet({
    upstreams: [{ id: "a", max_in_flight: 30 }, { id: "b", max_in_flight: 10 }],
    candidates: [{
      pick: "least_busy",
      pool: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
    }],
  }, { play: () => answersAfter(1_000) });
  const all = await f.clock.run(Promise.all(Array.from({ length: 20 }, () => f.request())));
  const firsts = all.map((r) => r.hops[0]);
  // 15 of 30 and 5 of 10 are the same share; a tie goes either way, so one may be off by one.
  assert.ok(Math.abs(countOf(firsts, "a") - 15) <= 1, `a took ${countOf(firsts, "a")}`);
  assert.ok(all.every((r) => r.error === null));
});

Deno.test("pool least_busy: a member that fails half its calls at once is not the least busy; healed, its share comes back", async () => {
  // a fails every other call at once and answers the others in 10 ms (never three failures in a
  // row, so cooldown never pauses it): it holds hardly a slot. b answers in 1 s. One request
  // every 100 ms, 400 of them.
  let aHealed = false;
  const f = fleet({
    upstreams: [{ id: "a", max_in_flight: 10 }, { id: "b", max_in_flight: 30 }],
    candidates: [{
      pick: "least_busy",
      pool: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
    }],
  }, {
    play: (id, n) => {
      if (id === "b" || aHealed) return answersAfter(1_000);
      return n % 2 === 0 ? failsWith(503) : answersAfter(10);
    },
  });
  const steady = () =>
    f.clock.run((async () => {
      const pending = [];
      for (let i = 0; i < 400; i++) {
        pending.push(f.request());
        await f.clock.sleep(100);
      }
      return await Promise.all(pending);
    })());
  const failing = await steady();
  assert.ok(failing.every((r) => r.error === null));
  const failedHops = failing.flatMap((r) => r.attempts).filter((a) => a.outcome !== "success");
  // By its capacity a healthy `a` takes about a quarter; failing, it took 356 of 400 first
  // picks, and 254 hops failed. Now its failures count as slots in use.
  const aFirst = countOf(failing.map((r) => r.hops[0]), "a");
  assert.ok(aFirst <= 100, `a took ${aFirst} of 400 first picks`);
  assert.ok(failedHops.length <= 100, `${failedHops.length} failed hops`);
  assert.equal(f.deps.cooldowns.phase("a"), "ok", "never paused: cooldown alone did not help");
  aHealed = true;
  const healed = await steady();
  const share = countOf(healed.map((r) => r.hops[0]), "a") / healed.length;
  assert.ok(share >= 0.2, `healed, a took ${share} of first picks`);
  console.log(
    `least_busy, a failing every other call: ${aFirst} of ` +
      `400 first picks, ${failedHops.length} failed hops; healed: ${share} of first picks`,
  );
});

Deno.test("pool cheapest: the cheapest member takes the traffic; on its failure the next cheapest, unpriced last", async () => {
  let cheapDown = false;
  const f = fleet({
    upstreams: [
      { id: "a", prices: { m: { input: 3, output: 15 } } },
      { id: "b", prices: { m: { input: 0.5, output: 1.5 } } },
      { id: "c" },
    ],
    candidates: [{
      pick: "cheapest",
      pool: ["c", "a", "b"].map((upstream) => ({ upstream, model: "m" })),
    }],
    failover: { retries_per_candidate: 0 },
  }, { play: (id) => id === "b" && cheapDown ? failsWith(503) : answersAfter(10) });
  assert.deepEqual(new Set(await f.sequence(20)), new Set(["b"]));
  cheapDown = true;
  assert.deepEqual((await f.one()).hops, ["b", "a"]);
  const g = fleet({
    upstreams: [{ id: "a", prices: { m: { input: 3, output: 15 } } }, { id: "c" }],
    candidates: [{
      pick: "cheapest",
      pool: ["c", "a"].map((upstream) => ({ upstream, model: "m" })),
    }],
    failover: { retries_per_candidate: 0 },
  }, { play: (id) => id === "a" ? failsWith(500) : answersAfter(10) });
  assert.deepEqual((await g.one()).hops, ["a", "c"]);
});

Deno.test("pool: its members in the pick's order, then the route's next entry", async () => {
  const f = fleet({
    upstreams: upstreams("a", "b", "c", "d"),
    candidates: [
      { pool: ["a", "b", "c"].map((upstream) => ({ upstream, model: "m" })) },
      { upstream: "d", model: "m" },
    ],
    failover: { retries_per_candidate: 0, failures_to_pause: 100 },
  }, { play: (id) => id === "d" ? answersAfter(10) : failsWith(502) });
  const orders = new Set<string>();
  for (let i = 0; i < 30; i++) {
    const { hops, error } = await f.one();
    assert.equal(error, null);
    assert.equal(hops.length, 4);
    assert.deepEqual(hops.slice(0, 3).toSorted(), ["a", "b", "c"]);
    assert.equal(hops[3], "d");
    orders.add(hops.slice(0, 3).join(""));
  }
  assert.ok(orders.size >= 4, `the members' order varies with the pick: ${[...orders]}`);
});

Deno.test("pool: a session stays on the member it started with across turns, until that member fails", async () => {
  let down = "";
  const f = fleet({
    upstreams: upstreams("a", "b", "c"),
    candidates: [{ pool: ["a", "b", "c"].map((upstream) => ({ upstream, model: "m" })) }],
    failover: { retries_per_candidate: 0 },
  }, { play: (id) => id === down ? failsWith(503) : answersAfter(10) });
  const turns = await f.sequence(30, { session: "s1" });
  const first = turns[0]!;
  assert.deepEqual(new Set(turns), new Set([first]), `the session moved: ${turns.join(" ")}`);
  // Without a session the same pool spreads.
  assert.equal(new Set(await f.sequence(30)).size, 3);

  down = first;
  const moved = await f.one({ session: "s1" });
  assert.equal(moved.error, null);
  assert.equal(moved.hops[0], first);
  const next = moved.hops[1]!;
  assert.notEqual(next, first);
  down = "";
  assert.deepEqual(new Set(await f.sequence(20, { session: "s1" })), new Set([next]));
});

Deno.test("pool: a paused member is skipped; a route of pools keeps failover's rules", async () => {
  const f = fleet({
    upstreams: upstreams("a", "b"),
    candidates: [{ pool: ["a", "b"].map((upstream) => ({ upstream, model: "m" })) }],
  }, { play: () => answersAfter(10) });
  f.deps.cooldowns.pauseFor("a", 60);
  assert.deepEqual(new Set(await f.sequence(20)), new Set(["b"]));
});

Deno.test("pool: a hedge starts the pool's next member beside a silent one", async () => {
  const f = fleet({
    upstreams: upstreams("a", "b"),
    candidates: [{ pool: ["a", "b"].map((upstream) => ({ upstream, model: "m" })) }],
    route: { hedge_after_secs: 2 },
  }, { play: (_, __, nth) => nth === 0 ? { end: "silent" } : answersAfter(500) });
  const { error, attempts } = await f.one();
  assert.equal(error, null);
  const [first, second] = f.log;
  assert.notEqual(first!.upstream, second!.upstream);
  assert.deepEqual([first!.at, second!.at], [0, 2_000]);
  assert.deepEqual(attempts.map((a) => a.outcome), ["hedge_lost", "success"]);
});

Deno.test("pool: a context-length refusal passes over the pool's members with no larger window", async () => {
  const tooLong = upstreamStatusError(400, {
    kind: "openai-chat",
    body: JSON.stringify({
      error: {
        message: "too long",
        type: "invalid_request_error",
        code: "context_length_exceeded",
      },
    }),
  });
  const f = fleet({
    upstreams: upstreams("a", "b", "c"),
    candidates: [
      { pool: ["a", "b"].map((upstream) => ({ upstream, model: "m", context_window: 8_000 })) },
      { upstream: "c", model: "large", context_window: 200_000 },
    ],
    route: { on_context_overflow: "next" },
  }, {
    play: (id) => id === "c" ? answersAfter(10) : { end: { how: "rejected", error: tooLong } },
  });
  const { error, hops } = await f.one();
  assert.equal(error, null);
  assert.equal(hops.length, 2, `the other member, with the same window, was passed over: ${hops}`);
  assert.equal(hops[1], "c");
});
