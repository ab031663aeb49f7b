/**
 * Sending finished records to an export destination (gateway/observability/exporter.ts,
 * docs/observability.md) on the virtual clock: a batch every second, and a receiver that fails
 * backed off 1, 2, 4, 8, 16 s and then every 30 s, at the exact second, until it answers again.
 */
import assert from "node:assert/strict";
import { requestRecord } from "../../tests/db_helpers.ts";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { DestinationSchema } from "./destination_schema.ts";
import { Exporter } from "./exporter.ts";

/** A receiver the test answers for: the instant (ms since the start) and batch size of each call. */
function receiver(clock: VirtualClock, opts: { failUntil: number }) {
  const calls: { at: number; records: number }[] = [];
  let waiting: { calls: number; resolve: () => void } | null = null;
  const fetch = (_url: string | URL | Request, init?: RequestInit) => {
    const body = JSON.parse(String(init?.body)) as { records: unknown[] };
    calls.push({ at: clock.sinceStart, records: body.records.length });
    if (waiting && calls.length >= waiting.calls) waiting.resolve();
    const status = clock.sinceStart < opts.failUntil ? 503 : 200;
    return Promise.resolve(new Response("", { status }));
  };
  /** Resolves once the receiver has had `n` calls. */
  const called = (n: number) => new Promise<void>((resolve) => (waiting = { calls: n, resolve }));
  return { calls, fetch: fetch as typeof globalThis.fetch, called };
}

function exporter(clock: VirtualClock, fetch: typeof globalThis.fetch) {
  const events: string[] = [];
  const e = new Exporter({
    clock,
    env: () => undefined,
    fetch,
    log: { event: (name) => void events.push(name) },
  });
  e.setDestinations([
    DestinationSchema.parse({ id: "hook", kind: "webhook", url: "http://127.0.0.1:9/hook" }),
  ]);
  return { e, events };
}

const record = (id: string) => ({ request: requestRecord({ id }), attempts: [] });

Deno.test("exporter: records pushed now are sent together 1 s later, and nothing is sent while none is queued", async () => {
  const clock = new VirtualClock();
  const hook = receiver(clock, { failUntil: 0 });
  const { e } = exporter(clock, hook.fetch);
  e.push(record("a"));
  e.push(record("b"));
  clock.advance(999);
  assert.deepEqual(hook.calls, []);
  await clock.run(hook.called(1));
  assert.deepEqual(hook.calls, [{ at: 1_000, records: 2 }]);
  await clock.run(clock.sleep(60_000));
  assert.equal(hook.calls.length, 1, "an empty queue sets no timer");
  assert.deepEqual(e.stats(), [{ id: "hook", queued: 0, dropped: 0, failures: 0 }]);
});

Deno.test("exporter: a failing receiver is asked again after 1, 2, 4, 8, 16, then every 30 s, and keeps the records", async () => {
  const clock = new VirtualClock();
  // Down for two minutes: the call at 122 s is the first after it.
  const hook = receiver(clock, { failUntil: 120_000 });
  const { e, events } = exporter(clock, hook.fetch);
  e.push(record("a"));
  await clock.run(hook.called(9));
  assert.deepEqual(hook.calls.map((c) => c.at), [
    1_000, // the first tick: fails, retry after 500 * 2^1 ms
    2_000,
    4_000,
    8_000,
    16_000,
    32_000, // 500 * 2^6 = 32 s: capped at 30 s from here on
    62_000,
    92_000,
    122_000, // the receiver is back
  ]);
  assert.equal(events.filter((name) => name === "export.failed").length, 8);
  assert.deepEqual(e.stats(), [{ id: "hook", queued: 0, dropped: 0, failures: 0 }]);
  assert.equal(hook.calls.at(-1)?.records, 1, "the record was kept through the failures");
});

Deno.test("exporter: a flush sends at once, whatever the backoff", async () => {
  const clock = new VirtualClock();
  const hook = receiver(clock, { failUntil: 1_500 });
  const { e } = exporter(clock, hook.fetch);
  e.push(record("a"));
  await clock.run(hook.called(1));
  assert.equal(e.stats()[0]?.failures, 1);
  clock.advance(500);
  await clock.run(e.flush());
  assert.deepEqual(hook.calls.map((c) => c.at), [1_000, 1_500]);
  assert.equal(e.stats()[0]?.queued, 0);
});
