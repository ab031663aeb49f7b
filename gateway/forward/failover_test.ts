/**
 * The candidate loop's edges, each decided by the verdict table (verdict.ts), in virtual time:
 * the status the client gets when no candidate is left (`final`), context overflow's next
 * candidate (`onward`), and a hop that crashes, in a hedge race or not, settled like any other.
 */
import assert from "node:assert/strict";
import { type Act, answersAfter, failsWith, fleet } from "../../tests/pool_kit.ts";
import { badResponse, upstreamStatusError } from "../formats/upstream_error.ts";
import type { ConfigInput } from "../config/schema.ts";

type Candidates = ConfigInput["routes"][number]["candidates"];
const AB: Candidates = [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }];

/** One request on a route a → b where each upstream plays `acts` in order. */
function route(acts: Record<string, Act[]>, opts: Partial<Parameters<typeof fleet>[0]> = {}) {
  return fleet({
    upstreams: [{ id: "a" }, { id: "b" }, { id: "c" }],
    candidates: AB,
    failover: { retries_per_candidate: 0 },
    ...opts,
  }, { play: (id, n) => acts[id]?.[n] ?? failsWith(500) });
}

const unreadable: Act = {
  end: { how: "bad_response", error: badResponse("upstream b sent an answer that is not JSON") },
};

Deno.test("final: a chat request whose last candidate answers unreadably gets the upstream's 502, not a timeout", async () => {
  for (const timeout_status of [504, 503] as const) {
    const f = route({ a: [failsWith(503)], b: [unreadable] }, {
      failover: { retries_per_candidate: 0, timeout_status },
    });
    const { error, hops } = await f.one();
    assert.deepEqual(hops, ["a", "b"]);
    assert.deepEqual([error?.status, error?.code], [502, "gw.upstream.bad_response"]);
    assert.deepEqual(error?.tried, ["a", "b"]);
  }
});

Deno.test("final: an overload or a silence as the last word is still the route's timeout_status", async () => {
  const f = route({ a: [unreadable], b: [failsWith(503)] }, {
    failover: { retries_per_candidate: 0, timeout_status: 503 },
  });
  const { error } = await f.one();
  assert.deepEqual([error?.status, error?.code], [503, "gw.upstream.error"]);
});

Deno.test("final: a stream's error as the last word is its own status only when it says a rate limit", async () => {
  const inStream = (status: number): Act => ({
    end: { how: "stream_error", error: upstreamStatusError(status, { kind: "openai-chat" }) },
  });
  const limited = await route({ a: [failsWith(503)], b: [inStream(429)] }).one();
  assert.equal(limited.error?.status, 429);
  const failed = await route({ a: [failsWith(503)], b: [inStream(500)] }).one();
  assert.equal(failed.error?.status, 504);
});

Deno.test("onward: only a refusal of the prompt's length passes over the windows no larger", async () => {
  const tooLong = upstreamStatusError(400, {
    kind: "openai-chat",
    body: JSON.stringify({ error: { message: "too long", code: "context_length_exceeded" } }),
  });
  const candidates: Candidates = [
    { upstream: "a", model: "small", context_window: 8_000 },
    { upstream: "b", model: "same", context_window: 8_000 },
    { upstream: "c", model: "large", context_window: 200_000 },
  ];
  const overflow = { on_context_overflow: "next" as const };
  // In a stream, uncharged, then straight to the larger window.
  const refused = route({
    a: [{ end: { how: "stream_error", error: tooLong } }],
    c: [answersAfter(10)],
  }, { candidates, route: overflow });
  const moved = await refused.one();
  assert.deepEqual([moved.error, moved.hops], [null, ["a", "c"]]);
  assert.equal(refused.deps.cooldowns.get("a").consecutiveFailures, 0);
  // Any other failure moves on in route order, the same window included.
  const other = await route({ a: [failsWith(503)], b: [answersAfter(10)] }, {
    candidates,
    route: overflow,
  }).one();
  assert.deepEqual([other.error, other.hops], [null, ["a", "b"]]);
});

/** Upstream `a`'s slot breaks the gateway as its hop closes: a crash of ours in the hop. */
function crashingA(f: ReturnType<typeof route>): void {
  const slots = f.deps.slots;
  const take = slots.tryAcquire.bind(slots);
  slots.tryAcquire = (upstream, max, opts) => {
    const release = take(upstream, max, opts);
    if (!release || upstream !== "a") return release;
    return () => {
      release();
      throw new TypeError("slot bookkeeping broke");
    };
  };
}

for (const hedged of [false, true]) {
  Deno.test(`crash: a hop that crashes ${hedged ? "in a hedge race's lane " : ""}settles as the gateway's fault; the next answers`, async () => {
    const f = route({ a: [failsWith(503)], b: [answersAfter(10)] }, {
      failover: { retries_per_candidate: 0, failures_to_pause: 1 },
      route: hedged ? { hedge_after_secs: 5 } : {},
    });
    crashingA(f);
    const { error, hops, attempts } = await f.one();
    assert.equal(error, null);
    assert.deepEqual(hops, ["a", "b"]);
    assert.deepEqual(
      attempts.map((a) => [a.upstream, a.outcome, a.errorCode]),
      [["a", "error", "gw.gateway.internal"], ["b", "success", null]],
    );
    // The gateway's own fault: nothing charged to the upstream it crashed on.
    assert.equal(f.deps.cooldowns.get("a").pausedUntil, null);
    assert.equal(f.deps.cooldowns.get("a").consecutiveFailures, 0);
  });
}
