/**
 * Per-key session limits (gateway/policy/session_limits.ts, docs/config.md "Session limits") on
 * the virtual clock: the loop breaker's window ends at the exact millisecond, its Retry-After
 * says when the oldest copy leaves it, and a history that does not answer holds a session's
 * first request for 500 ms, no more.
 */
import assert from "node:assert/strict";
import type { Db } from "../../db/client.ts";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import type { GatewayKey } from "../config/schema.ts";
import type { GatewayError } from "../runtime/gateway_error.ts";
import type { Logger } from "../runtime/logger.ts";
import { SessionLimits } from "./session_limits.ts";

/** The example of docs/config.md: the third copy of one body within a minute is refused. */
const KEY = { id: "k", key_env: "K", loop_breaker: { repeats: 3, window_secs: 60 } } as GatewayKey;

function limits() {
  const clock = new VirtualClock();
  const limits = new SessionLimits({ db: null, clock });
  /** Sends `body` in session `s`: "admitted", or the 429's code and Retry-After. */
  const send = (body: string, s = "s") =>
    limits.admit(KEY, { sessionId: s, bodyDigest: () => Promise.resolve(body) }).then(
      () => "admitted",
      (err: GatewayError) => `${err.code} ${err.retryAfterSecs}`,
    );
  return { clock, send };
}

Deno.test("loop breaker: the third copy within 60 s is refused, with Retry-After until the oldest leaves", async () => {
  const { clock, send } = limits();
  assert.equal(await send("same"), "admitted");
  clock.advance(10_000);
  assert.equal(await send("same"), "admitted");
  clock.advance(20_000);
  assert.equal(await send("same"), "gw.session.loop_detected 30");
  clock.advance(29_999);
  assert.equal(await send("same"), "gw.session.loop_detected 1", "1 ms before the window ends");
  clock.advance(1);
  assert.equal(await send("same"), "admitted", "the first copy left the window at 60 000 ms");
  // Now the copies of 10 s and 60 s are in: the next is refused until 70 s.
  assert.equal(await send("same"), "gw.session.loop_detected 10");
});

Deno.test("loop breaker: refused copies do not count, so a client retrying is not held off longer", async () => {
  const { clock, send } = limits();
  await send("same");
  await send("same");
  for (let i = 0; i < 59; i++) {
    clock.advance(1_000);
    assert.match(await send("same"), /^gw\.session\.loop_detected /);
  }
  clock.advance(1_000);
  assert.equal(await send("same"), "admitted", "at 60 s, as if none of the 59 had come");
});

Deno.test("loop breaker: another body, or the same body in another session, always passes", async () => {
  const { send } = limits();
  await send("same");
  await send("same");
  assert.equal(await send("progress"), "admitted");
  assert.equal(await send("same", "other"), "admitted");
  assert.equal(await send("same"), "gw.session.loop_detected 60");
});

Deno.test("session budget: a history that does not answer holds the first request 500 real ms (a bound on the database, which no clock shortens), then it counts from here", async () => {
  const clock = new VirtualClock();
  let reads = 0;
  const silent = {
    client: { execute: () => (reads++, new Promise(() => {})) },
  } as unknown as Db;
  const events: [string, Record<string, unknown>][] = [];
  const log: Logger = { event: (name, fields) => void events.push([name, fields ?? {}]) };
  const limits = new SessionLimits({ db: silent, clock, log });
  const key = { id: "k", key_env: "K", session_budget: { requests: 2 } } as GatewayKey;
  let admittedAt: number | null = null;
  const startedAt = performance.now();
  const first = limits.admit(key, { sessionId: "s" }).then(() => (admittedAt = clock.sinceStart));
  clock.advance(60_000);
  await Promise.resolve();
  assert.equal(admittedAt, null, "a minute of the gateway's clock does not end a real bound");
  await first;
  assert.ok(performance.now() - startedAt >= 490, "held for the real bound");
  assert.equal(admittedAt, 60_000);
  assert.deepEqual(events, [["session.usage_unread", { key: "k", reason: "timeout" }]]);
  const admit = () =>
    clock.run(
      limits.admit(key, { sessionId: "s" }).then(() => "admitted", (err: GatewayError) => err.code),
    );
  assert.equal(await admit(), "admitted");
  assert.equal(await admit(), "gw.session.budget_exhausted", "two requests counted here");
  assert.equal(reads, 1, "later requests do not read again");
});
