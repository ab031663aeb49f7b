/**
 * A session's pin to the upstream that last answered it (gateway/route/affinity.ts,
 * docs/observability.md "Cache-aware affinity") on the virtual clock: kept for the hour a
 * provider keeps a prompt cache warm unread, to the millisecond, and forgotten after it.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { Affinity, affinitySession, PIN_IDLE_MS } from "./affinity.ts";

const session = affinitySession({ keyId: "k", sessionId: "s" });

Deno.test("affinity: a pin lasts an hour after the session's last answer, and not 1 ms more", () => {
  assert.equal(PIN_IDLE_MS, 3_600_000);
  const clock = new VirtualClock();
  const affinity = new Affinity(100, { clock });
  affinity.set("r", { sessionId: session, upstream: "fallback" });
  clock.advance(3_600_000);
  assert.equal(affinity.get("r", session), "fallback", "at exactly one hour");
  clock.advance(1);
  assert.equal(affinity.get("r", session), undefined, "the route's own order again");
});

Deno.test("affinity: each answer starts the hour again, so a steady session stays pinned all day", () => {
  const clock = new VirtualClock();
  const affinity = new Affinity(100, { clock });
  for (let turn = 0; turn < 24; turn++) {
    affinity.set("r", { sessionId: session, upstream: "a" });
    clock.advance(3_599_000);
    assert.equal(affinity.get("r", session), "a");
  }
  clock.advance(1_001);
  assert.equal(affinity.get("r", session), undefined);
});

Deno.test("affinity: reading a pin does not keep it: only answers do", () => {
  const clock = new VirtualClock();
  const affinity = new Affinity(100, { clock });
  affinity.set("r", { sessionId: session, upstream: "a" });
  for (let i = 0; i < 6; i++) {
    clock.advance(600_000);
    assert.equal(affinity.get("r", session), "a");
  }
  clock.advance(1);
  assert.equal(affinity.get("r", session), undefined);
});

Deno.test("affinity: a pin is per route and per key; drop forgets it only while it names that upstream", () => {
  const affinity = new Affinity(100, { clock: new VirtualClock() });
  const other = affinitySession({ keyId: "k2", sessionId: "s" });
  affinity.set("r", { sessionId: session, upstream: "a" });
  assert.equal(affinity.get("side", session), undefined, "another route's candidates");
  assert.equal(affinity.get("r", other), undefined, "another key's session of the same id");
  assert.equal(affinity.get("r", null), undefined);
  affinity.drop("r", { sessionId: session, upstream: "b" });
  assert.equal(affinity.get("r", session), "a");
  affinity.drop("r", { sessionId: session, upstream: "a" });
  assert.equal(affinity.get("r", session), undefined);
});

Deno.test("affinity: past its bound the oldest pin goes first", () => {
  const clock = new VirtualClock();
  const affinity = new Affinity(2, { clock });
  const s = (id: string) => affinitySession({ keyId: "k", sessionId: id });
  affinity.set("r", { sessionId: s("1"), upstream: "a" });
  affinity.set("r", { sessionId: s("2"), upstream: "a" });
  affinity.set("r", { sessionId: s("1"), upstream: "b" });
  affinity.set("r", { sessionId: s("3"), upstream: "a" });
  assert.equal(affinity.get("r", s("2")), undefined, "the least recently set");
  assert.equal(affinity.get("r", s("1")), "b");
  assert.equal(affinity.get("r", s("3")), "a");
});
