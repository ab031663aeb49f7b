/**
 * A half-open probe is given back once (probe_hold.ts), as the verdict table says of how it
 * ended (`probeEnd` in verdict.ts): counted when a hop sent it, never after a hop took it as
 * if unsent, and never twice.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { Cooldowns, type ProbeTicket } from "../route/cooldown.ts";
import { Metrics } from "../runtime/metrics.ts";
import { ProbeHold } from "./probe_hold.ts";

/** Upstream `a` paused by one failure and left until its pause is over: half-open. */
async function halfOpen() {
  const clock = new VirtualClock();
  const cooldowns = new Cooldowns(clock, {
    policy: () => ({ failuresToPause: 1, pauseSecs: 60, maxPauseSecs: 600 }),
    save: () => {},
  });
  cooldowns.failure("a", "gw.upstream.error");
  await clock.run(clock.sleep(60_000));
  const ticket = await cooldowns.claimProbe("a", { leaseMs: 30_000 });
  assert.equal(typeof ticket, "object");
  const metrics = new Metrics();
  const hold = new ProbeHold([ticket as ProbeTicket], {
    upstream: "a",
    deps: { cooldowns, metrics },
  });
  assert.equal(cooldowns.halfOpen("a"), false, "claimed");
  return { cooldowns, metrics, hold };
}

const counted = (metrics: Metrics) =>
  ["ok", "failed", "released"].map((result) => metrics.probes.get({ upstream: "a", result }));

Deno.test("probe hold: one the loop never sent goes back at once, uncounted", async () => {
  const { cooldowns, metrics, hold } = await halfOpen();
  hold.end("unsent");
  assert.equal(cooldowns.halfOpen("a"), true, "the next request may probe");
  assert.deepEqual(counted(metrics), [0, 0, 0]);
});

Deno.test("probe hold: once a hop took it, only the hop's end gives it back, counted once", async () => {
  const { cooldowns, metrics, hold } = await halfOpen();
  hold.send();
  hold.end("unsent");
  assert.equal(cooldowns.halfOpen("a"), false, "still the hop's while it runs");
  hold.end("released");
  hold.end("released");
  hold.end("unsent");
  assert.equal(cooldowns.halfOpen("a"), true);
  assert.deepEqual(counted(metrics), [0, 0, 1]);
});
