/**
 * The time from a stop to the upstream connection's close (gateway/forward/cancel_timer.ts,
 * `pulsegate_upstream_cancel_seconds` in docs/observability.md), on the virtual clock: the span
 * observed is the clock's, to the millisecond, once, and only after one of our stops.
 */
import assert from "node:assert/strict";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { Metrics } from "../runtime/metrics.ts";
import { CancelTimer } from "./cancel_timer.ts";
import { clientDisconnected, idleTimeout } from "./stop_reasons.ts";

function timed() {
  const clock = new VirtualClock();
  const metrics = new Metrics();
  const stop = new AbortController();
  const timer = new CancelTimer(stop.signal, { clock, metrics, upstream: "u" });
  const observed = (reason: string) => metrics.upstreamCancel.get({ upstream: "u", reason });
  return { clock, metrics, stop, timer, observed };
}

Deno.test("cancel timer: an idle timeout's stop to the close, 250 ms of clock time, observed once under its reason", () => {
  const { clock, stop, timer, observed } = timed();
  // The stop comes at the 300 s idle timeout; only the span after it is the cancel's.
  clock.advance(300_000);
  stop.abort(idleTimeout("u", { secs: 300, midStream: true, timeoutStatus: 504 }));
  clock.advance(250);
  timer.closed();
  assert.deepEqual(observed("gw.upstream.idle_timeout_mid_stream"), { count: 1, sum: 0.25 });
  clock.advance(10_000);
  timer.closed();
  assert.deepEqual(observed("gw.upstream.idle_timeout_mid_stream"), { count: 1, sum: 0.25 });
});

Deno.test("cancel timer: a close at the stop's own instant is 0 s", () => {
  const { stop, timer, observed } = timed();
  stop.abort(clientDisconnected());
  timer.closed();
  assert.deepEqual(observed("gw.client.disconnected"), { count: 1, sum: 0 });
});

Deno.test("cancel timer: a hop that finished first, or was aborted by no stop of ours, is not timed", () => {
  const finished = timed();
  finished.clock.advance(5_000);
  finished.timer.closed();
  const foreign = timed();
  foreign.stop.abort(new Error("not one of ours"));
  foreign.clock.advance(5_000);
  foreign.timer.closed();
  for (const { metrics } of [finished, foreign]) {
    assert.doesNotMatch(metrics.render(), /pulsegate_upstream_cancel_seconds_count\{/);
  }
});
