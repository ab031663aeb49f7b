/**
 * The process's budget of embedding vectors (gateway/forward/vector_budget.ts, docs/security.md
 * "Embeddings stay bounded"): what fits is taken at once; what does not waits in turn, never
 * overtaken, and is refused 429 `gw.embeddings.memory_full` when no room comes in time or the
 * queue is full; a waiter whose request stops leaves the queue; every hold is given back once.
 */
import assert from "node:assert/strict";
import { VectorBudget, type VectorHold } from "../gateway/forward/vector_budget.ts";
import { GatewayError } from "../gateway/runtime/gateway_error.ts";
import { Metrics } from "../gateway/runtime/metrics.ts";
import { VirtualClock } from "./virtual_clock.ts";

function budget(opts: { bytes?: number; waiting?: number } = {}) {
  const metrics = new Metrics();
  // Virtual: no wait below ends unless a test runs the clock (`clock.run`).
  const clock = new VirtualClock();
  const b = new VectorBudget({
    bytes: opts.bytes ?? 100,
    waiting: opts.waiting ?? 4,
    clock,
    metrics,
  });
  return { b, metrics, clock };
}

const never = new AbortController().signal;
/** Long enough never to end in a test that does not mean it to. */
const LONG = { waitMs: 60_000, signal: never };

function hold(taken: VectorHold | GatewayError | null): VectorHold {
  assert.ok(taken !== null && !(taken instanceof GatewayError), `a hold, not ${taken}`);
  return taken;
}

Deno.test("what fits is taken at once, counted in the gauge, and given back once", async () => {
  const { b, metrics } = budget();
  const a = hold(await b.take(60, LONG));
  const c = hold(await b.take(40, LONG));
  assert.equal(b.taken, 100);
  assert.equal(metrics.embeddingVectorBytes, 100);
  assert.match(metrics.render(), /^pulsegate_embedding_vector_bytes 100$/m);
  a.release();
  a.release();
  assert.equal(b.taken, 40);
  c.shrink(10);
  assert.equal(b.taken, 10);
  c.shrink(30); // never grows back
  assert.equal(b.taken, 10);
  c.release();
  assert.equal(b.taken, 0);
  assert.equal(metrics.embeddingVectorBytes, 0);
});

Deno.test("a request that does not fit waits in turn; a later small one does not overtake it", async () => {
  const { b } = budget();
  const first = hold(await b.take(70, LONG));
  const order: string[] = [];
  const big = b.take(60, LONG).then((h) => (order.push("big"), hold(h)));
  const small = b.take(10, LONG).then((h) => (order.push("small"), hold(h)));
  await new Promise((r) => setTimeout(r, 0));
  // 30 are free, enough for the small one: it still waits behind the big one.
  assert.deepEqual(order, []);
  assert.equal(b.taken, 70);
  first.shrink(40);
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(order, ["big"]);
  first.release();
  const [h1, h2] = await Promise.all([big, small]);
  assert.deepEqual(order, ["big", "small"]);
  assert.equal(b.taken, 70);
  h1.release();
  h2.release();
  assert.equal(b.taken, 0);
});

Deno.test("no room in time: 429 gw.embeddings.memory_full with Retry-After, and nothing held", async () => {
  const { b, clock } = budget();
  const full = hold(await b.take(100, LONG));
  const refused = await clock.run(b.take(1, { waitMs: 30, signal: never }));
  assert.equal(clock.sinceStart, 30, "refused when its wait ran out, not before");
  assert.ok(refused instanceof GatewayError);
  assert.equal(refused.code, "gw.embeddings.memory_full");
  assert.equal(refused.status, 429);
  assert.equal(refused.retryAfterSecs, 1);
  full.release();
  assert.equal(b.taken, 0);
  // The one that gave up is not granted later.
  const again = hold(await b.take(100, LONG));
  again.release();
});

Deno.test("a full queue refuses at once; a waiter whose request stops leaves it", async () => {
  const { b, clock } = budget({ waiting: 2 });
  const full = hold(await b.take(100, LONG));
  const stop = new AbortController();
  const waiting = [b.take(50, { waitMs: 60_000, signal: stop.signal }), b.take(50, LONG)];
  // Run with no virtual time to spend: a wait of any length would throw here.
  const third = await clock.run(b.take(1, LONG), { limitMs: 0 });
  assert.ok(third instanceof GatewayError, "the queue of 2 is full");
  assert.equal(third.code, "gw.embeddings.memory_full");
  assert.equal(clock.sinceStart, 0, "refused without waiting");
  stop.abort();
  assert.equal(await waiting[0], null);
  full.release();
  const second = hold(await waiting[1]!);
  assert.equal(b.taken, 50);
  second.release();
  assert.equal(b.taken, 0);
});

Deno.test("a request larger than the whole budget takes all of it rather than never running", async () => {
  const { b } = budget();
  const all = hold(await b.take(500, LONG));
  assert.equal(all.bytes, 100);
  all.release();
  assert.equal(b.taken, 0);
});
