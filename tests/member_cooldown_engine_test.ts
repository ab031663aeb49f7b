/**
 * Cooldown per member (docs/design.md "Cooldown") in virtual time: an upstream serving several
 * models keeps a cooldown for each of them (its members) beside its own. A model that fails alone
 * pauses its member alone; a fault of the whole upstream pauses the upstream; each pause has its
 * doubling and its one probe. Calls are counted per member (`upstream/model`).
 */
import assert from "node:assert/strict";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import { upstreamStatusError } from "../gateway/formats/upstream_error.ts";
import { type Act, answersAfter, countOf, failsWith, fleet } from "./pool_kit.ts";

const PAUSE_MS = 60_000;

/** A cheapest pool of two models on one upstream `up`, then the route's other upstream `far`. */
function oneUpstreamPool(
  play: (member: string, n: number) => Act,
  opts: { far?: boolean } = {},
) {
  return fleet({
    upstreams: [
      { id: "up", prices: { cheap: { input: 0.1, output: 0.2 }, dear: { input: 3, output: 15 } } },
      { id: "far" },
    ],
    candidates: [
      {
        pick: "cheapest",
        pool: [{ upstream: "up", model: "cheap" }, { upstream: "up", model: "dear" }],
      },
      ...(opts.far ? [{ upstream: "far", model: "x" }] : []),
    ],
  }, { play, byMember: true });
}

const refused: Act = {
  end: {
    how: "connection",
    error: new GatewayError("could not reach upstream up: connection refused", {
      code: "gw.upstream.unreachable",
    }),
  },
};

const missing: Act = {
  end: {
    how: "model_missing",
    error: upstreamStatusError(404, {
      kind: "openai-chat",
      body: JSON.stringify({
        error: { message: "The model `cheap` does not exist", code: "model_not_found" },
      }),
    }),
  },
};

Deno.test("member cooldown: a model failing alone pauses its member after 4 calls; cheapest then goes straight to the other member, and the upstream stays healthy", async () => {
  const f = oneUpstreamPool((member) => member === "up/cheap" ? failsWith(503) : answersAfter(10));
  const all = await f.clock.run(
    (async () => {
      const done = [];
      for (let i = 0; i < 10; i++) done.push(await f.request());
      return done;
    })(),
  );
  assert.ok(all.every((r) => r.error === null));
  // Request 1: a try and a retry; request 2: the third failure pauses the member, then its retry.
  assert.equal(f.calls.get("up/cheap"), 4);
  assert.equal(f.calls.get("up/dear"), 10);
  assert.deepEqual(all.slice(2).map((r) => r.hops), Array(8).fill(["up"]));
  const { cooldowns } = f.deps;
  assert.equal(cooldowns.phase("up/cheap"), "paused");
  assert.equal(cooldowns.get("up/cheap").pauseCount, 1);
  assert.equal(cooldowns.phase("up/dear"), "ok");
  assert.equal(cooldowns.get("up/dear").consecutiveFailures, 0);
  assert.equal(cooldowns.phase("up"), "ok", "the upstream's other model answered between");
  assert.equal(cooldowns.get("up").pauseCount, 0);
});

Deno.test("member cooldown: after its pause one probe reaches the member; failing, it doubles; recovered, cheapest takes it back", async () => {
  let cheapUp = false;
  const f = oneUpstreamPool((member) =>
    member === "up/cheap" && !cheapUp ? failsWith(503) : answersAfter(10)
  );
  await f.sequence(2);
  assert.equal(f.deps.cooldowns.phase("up/cheap"), "paused");
  const paid = f.calls.get("up/cheap")!;
  await f.clock.run(f.clock.sleep(PAUSE_MS));
  assert.equal(f.deps.cooldowns.phase("up/cheap"), "probing");
  const failedAt = f.clock.now();
  const probed = await f.clock.run(Promise.all(Array.from({ length: 5 }, () => f.request())));
  assert.ok(probed.every((r) => r.error === null));
  assert.equal(f.calls.get("up/cheap"), paid + 1, "one probe, not retried");
  assert.equal(f.deps.cooldowns.get("up/cheap").pausedUntil! - failedAt, 2 * PAUSE_MS);
  assert.equal(f.deps.cooldowns.phase("up"), "ok");

  cheapUp = true;
  await f.clock.run(f.clock.sleep(2 * PAUSE_MS));
  await f.sequence(1);
  assert.equal(f.deps.cooldowns.phase("up/cheap"), "ok");
  assert.equal(f.calls.get("up/cheap"), paid + 2);
  const before = f.calls.get("up/dear")!;
  await f.sequence(5);
  assert.equal(f.calls.get("up/cheap"), paid + 7, "the cheapest member has its traffic back");
  assert.equal(f.calls.get("up/dear"), before);
});

Deno.test("member cooldown: a refused connection pauses the upstream as a whole; every member of it is passed over and none is charged", async () => {
  const f = oneUpstreamPool((member) => member.startsWith("up/") ? refused : answersAfter(10), {
    far: true,
  });
  const firsts = await f.sequence(2);
  // Three refusals in a row (a try and a retry, then one more) pause the upstream.
  assert.equal(f.deps.cooldowns.phase("up"), "paused");
  for (const member of ["up/cheap", "up/dear"]) {
    assert.equal(f.deps.cooldowns.get(member).consecutiveFailures, 0, member);
    assert.equal(f.deps.cooldowns.phase(member), "ok", member);
  }
  const calls = (f.calls.get("up/cheap") ?? 0) + (f.calls.get("up/dear") ?? 0);
  const after = await f.sequence(5);
  assert.deepEqual(after, Array(5).fill("far"), "no call to the paused upstream");
  assert.equal((f.calls.get("up/cheap") ?? 0) + (f.calls.get("up/dear") ?? 0), calls);
  assert.equal(firsts[0], "up");
});

Deno.test("member cooldown: a 5xx from every model of an upstream pauses the upstream as a whole", async () => {
  const f = oneUpstreamPool(
    (member) => member.startsWith("up/") ? failsWith(503) : answersAfter(10),
    {
      far: true,
    },
  );
  const first = await f.one();
  // cheap: a try and a retry; dear: its third failure in a row with no answer between pauses `up`.
  assert.deepEqual(first.hops, ["up", "up", "up", "up", "far"]);
  assert.equal(f.deps.cooldowns.phase("up"), "paused");
  assert.deepEqual(await f.sequence(3), ["far", "far", "far"]);
  assert.equal(f.calls.get("up/cheap"), 2);
  assert.equal(f.calls.get("up/dear"), 2);
});

Deno.test("member cooldown: a model the upstream says is not there is passed over at once and charged to its member alone", async () => {
  const f = oneUpstreamPool((member) => member === "up/cheap" ? missing : answersAfter(10));
  const all = [await f.one(), await f.one(), await f.one(), await f.one()];
  assert.ok(all.every((r) => r.error === null), "the next member answers the caller");
  assert.deepEqual(all.map((r) => r.hops.length), [2, 2, 2, 1], "never retried; paused at three");
  assert.equal(f.calls.get("up/cheap"), 3);
  assert.equal(f.deps.cooldowns.phase("up/cheap"), "paused");
  assert.match(f.deps.cooldowns.get("up/cheap").reason!, /3 failures in a row/);
  assert.equal(f.deps.cooldowns.get("up").consecutiveFailures, 0, "not the upstream's fault");
  assert.equal(f.deps.cooldowns.phase("up"), "ok");
});

Deno.test("member cooldown: a 429's Retry-After pauses the member that said it, not its upstream", async () => {
  const limited: Act = {
    end: {
      how: "rate_limited",
      error: upstreamStatusError(429, { kind: "openai-chat", retryAfterSecs: 30 }),
    },
  };
  const f = oneUpstreamPool((member) => member === "up/cheap" ? limited : answersAfter(10));
  const limitedAt = f.clock.now(); // the 429 comes at once
  const first = await f.one();
  assert.equal(first.error, null);
  assert.equal(f.calls.get("up/cheap"), 1, "a Retry-After past 10 s is not waited out");
  const { cooldowns } = f.deps;
  assert.equal(cooldowns.phase("up/cheap"), "paused");
  assert.equal(cooldowns.get("up/cheap").pausedUntil! - limitedAt, 30_000);
  assert.equal(cooldowns.phase("up"), "ok");
  assert.deepEqual(await f.sequence(3), ["up", "up", "up"]);
  assert.equal(f.calls.get("up/cheap"), 1);
  assert.equal(f.calls.get("up/dear"), 4);
});

Deno.test("member cooldown: when an upstream and one of its members recover together, the member with no fault of its own probes the upstream", async () => {
  const f = oneUpstreamPool(() => answersAfter(10), { far: true });
  const { cooldowns } = f.deps;
  for (let i = 0; i < 3; i++) {
    cooldowns.failure("up", "gw.upstream.error");
    cooldowns.failure("up/cheap", "gw.upstream.error");
  }
  await f.clock.run(f.clock.sleep(PAUSE_MS));
  assert.equal(cooldowns.phase("up"), "probing");
  assert.equal(cooldowns.phase("up/cheap"), "probing");
  const probe = await f.one();
  // cheap is cheaper and first in the pool, yet the upstream is judged by dear.
  assert.deepEqual(probe.hops, ["up"]);
  assert.equal(f.calls.get("up/dear"), 1);
  assert.equal(f.calls.get("up/cheap") ?? 0, 0);
  assert.equal(cooldowns.phase("up"), "ok");
  // Then cheap's own probe, alone.
  await f.one();
  assert.equal(f.calls.get("up/cheap"), 1);
  assert.equal(cooldowns.phase("up/cheap"), "ok");
  assert.equal(countOf(f.log.map((l) => l.upstream), "far/x"), 0);
});
