/**
 * The verdict table (gateway/forward/verdict.ts) against docs/design.md: every fault of the fault
 * table, and every cell of the table itself. Pure: no gateway, no network, milliseconds.
 */
import assert from "node:assert/strict";
import { type How, type Place, verdictFor, VERDICTS } from "./verdict.ts";
import { retryWait } from "./verdict.ts";
import { statusEnding, thrownEnding } from "./hop_ending.ts";
import { upstreamStatusError } from "../formats/upstream_error.ts";
import {
  abortedByOperator,
  clientDisconnected,
  deadlineExceeded,
  idleTimeout,
  shuttingDown,
} from "./stop_reasons.ts";
import { hedgeLost } from "./hedge_lane.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { FAULTS } from "../../tests/fault_matrix/faults.ts";

const HOWS = Object.keys(VERDICTS) as How[];
const REQUEST_STOPS: How[] = ["aborted", "client_gone", "shutdown", "hedge_lost"];
const PLACES: Place[] = [false, true].flatMap((content) =>
  [false, true].flatMap((resuming) =>
    [false, true].map((overflow) => ({ content, resuming, overflow }))
  )
);
const plain = (content: boolean): Place => ({ content, resuming: false, overflow: false });

for (const fault of FAULTS) {
  for (const mode of ["stream", "whole"] as const) {
    const b = fault[mode];
    if (!b) continue;
    Deno.test(`verdict: ${fault.name} (${mode}) does what the fault table says`, () => {
      const content = b.effect === "fail_after" || b.effect === "ok";
      const v = verdictFor(b.how, plain(content));
      switch (b.effect) {
        case "ok":
          assert.deepEqual([v.step, v.outcome, v.cooldown], ["done", "success", undefined]);
          break;
        case "fail_before":
          assert.equal(v.step, b.retried ? "retry" : "next");
          assert.equal(v.outcome, b.slow ? "idle_timeout" : "error");
          assert.ok(v.cooldown, "a failure before content is charged to the upstream");
          break;
        case "fail_after":
          assert.equal(v.step, "stop");
          assert.equal(v.cooldown, undefined, "a break after content is not a failure to start");
          assert.equal(v.resumable, true);
          break;
        case "reject":
          assert.deepEqual([v.step, v.cooldown], ["stop", undefined]);
      }
    });
  }
}

Deno.test("verdict: after content nothing else is tried and nothing is charged, in any place", () => {
  for (const how of HOWS) {
    for (const place of PLACES.filter((p) => p.content)) {
      const v = verdictFor(how, place);
      assert.ok(v.step === "stop" || v.step === "done", `${how} ${JSON.stringify(place)}`);
      assert.equal(v.cooldown, undefined, how);
      assert.equal(v.dropsAffinity, undefined, how);
    }
  }
});

Deno.test("verdict: the request's own stops end it as they are: never charged, retried or resumed", () => {
  for (const how of REQUEST_STOPS) {
    for (const place of PLACES) {
      const v = verdictFor(how, place);
      assert.equal(v.step, "stop", how);
      assert.equal(v.cooldown, undefined, how);
      assert.equal(v.resumable, undefined, how);
    }
  }
  assert.equal(verdictFor("client_gone", plain(false)).outcome, "client_disconnected");
  assert.equal(verdictFor("shutdown", plain(true)).outcome, "aborted");
  assert.equal(verdictFor("hedge_lost", plain(false)).outcome, "hedge_lost");
});

Deno.test("verdict: a continuation that fails before its content moves on, whatever refused it", () => {
  for (const how of HOWS.filter((h) => !REQUEST_STOPS.includes(h) && h !== "answered")) {
    const v = verdictFor(how, { content: false, resuming: true, overflow: false });
    assert.notEqual(v.step, "stop", how);
  }
  assert.equal(verdictFor("answered", { ...plain(true), resuming: true }).outcome, "resumed");
});

Deno.test("verdict: a context-length refusal moves on uncharged, as a status or in a stream", () => {
  for (const how of ["rejected", "stream_error"] as const) {
    const v = verdictFor(how, { content: false, resuming: false, overflow: true });
    assert.deepEqual([v.step, v.cooldown], ["next", undefined], how);
  }
  // Without the route's option, the caller reads the refusal as the provider said it.
  assert.equal(verdictFor("rejected", plain(false)).step, "stop");
  // After content the refusal is the stream's end, never a move to another candidate.
  assert.equal(verdictFor("stream_error", { ...plain(true), overflow: true }).step, "stop");
});

Deno.test("verdict: a probe of a recovering upstream is never retried; all else is as for any hop", () => {
  for (const how of HOWS) {
    for (const place of PLACES) {
      const plainVerdict = verdictFor(how, place);
      const probing = verdictFor(how, { ...place, probing: true });
      if (plainVerdict.step === "retry") {
        // Charged as before, and the next candidate instead of a second call to the upstream.
        assert.deepEqual(probing, { ...plainVerdict, step: "next" }, how);
      } else assert.deepEqual(probing, plainVerdict, `${how} ${JSON.stringify(place)}`);
    }
  }
});

Deno.test("verdict: only silence before content drops the session's upstream", () => {
  const dropping = HOWS.filter((how) => verdictFor(how, plain(false)).dropsAffinity);
  assert.deepEqual(dropping, ["idle_timeout", "first_content_timeout"]);
  const counted = HOWS.flatMap((how) =>
    [false, true].map((content) => [how, content, verdictFor(how, plain(content)).idle])
  ).filter(([, , idle]) => idle);
  assert.deepEqual(counted, [
    ["idle_timeout", false, "before_content"],
    ["idle_timeout", true, "mid_stream"],
    ["first_content_timeout", false, "before_content"],
    ["first_content_timeout", true, "mid_stream"],
  ]);
});

Deno.test("retry: 0.5 s doubling while retries last; a Retry-After over 10 s goes to the next", () => {
  assert.deepEqual([0, 1, 2].map((r) => retryWait(r, { retries: 3 })), [0.5, 1, 2]);
  assert.equal(retryWait(1, { retries: 1 }), null);
  assert.equal(retryWait(0, { retries: 1, retryAfterSecs: 3 }), 3);
  assert.equal(retryWait(0, { retries: 1, retryAfterSecs: 0 }), 0);
  assert.equal(retryWait(0, { retries: 1, retryAfterSecs: 11 }), null);
  assert.equal(retryWait(0, { retries: 0 }), null);
});

Deno.test("endings: an upstream's status says how its hop ended", () => {
  const cases: [number, How][] = [
    [400, "rejected"],
    [404, "rejected"],
    [422, "rejected"],
    [401, "refused"],
    [403, "refused"],
    [408, "refused"],
    [501, "refused"],
    [429, "rate_limited"],
    [500, "overloaded"],
    [502, "overloaded"],
    [503, "overloaded"],
    [504, "overloaded"],
    [529, "overloaded"],
  ];
  for (const [status, how] of cases) {
    assert.equal(statusEnding(status, upstreamStatusError(status)).how, how, String(status));
  }
});

Deno.test("endings: a thrown error says how its hop ended, by our stop reason first", () => {
  const at = (reason: unknown, err: unknown = new Error("x"), content = false) => {
    const controller = new AbortController();
    if (reason !== undefined) controller.abort(reason);
    return thrownEnding(err, { signal: controller.signal, upstream: "up", content });
  };
  const idle = (midStream: boolean) =>
    idleTimeout("up", { secs: 1, midStream, timeoutStatus: 504 });
  assert.equal(at(abortedByOperator()).how, "aborted");
  assert.equal(at(clientDisconnected()).how, "client_gone");
  assert.equal(at(shuttingDown()).how, "shutdown");
  assert.equal(at(hedgeLost("b")).how, "hedge_lost");
  assert.equal(at(idle(false)).how, "idle_timeout");
  assert.equal(at(idle(true), new Error("x"), true).how, "idle_timeout");
  assert.equal(at(deadlineExceeded("up", { secs: 1, timeoutStatus: 504 })).how, "deadline");
  const firstContent = new GatewayError("x", { code: "gw.upstream.first_content_timeout" });
  assert.equal(at(firstContent).how, "first_content_timeout");
  // No stop of ours: what broke.
  const broken = at(undefined, new TypeError("connection reset"));
  assert.deepEqual([broken.how, broken.error?.code], ["connection", "gw.upstream.unreachable"]);
  const brokeOff = at(undefined, new TypeError("connection reset"), true);
  assert.deepEqual([brokeOff.how, brokeOff.error?.code], ["connection", "gw.upstream.error"]);
  const callers = new GatewayError("tool arguments are not an object", {
    code: "gw.client.invalid_request",
  });
  assert.equal(at(undefined, callers).how, "caller_input");
  const unreadable = new GatewayError("not JSON", { code: "gw.upstream.bad_response" });
  assert.equal(at(undefined, unreadable).how, "bad_response");
  // A finished hop's own abort (not one of our stops) says nothing about the upstream.
  assert.equal(at({ reason: "hop finished" }, new TypeError("aborted")).how, "connection");
});

Deno.test("verdict: the gateway's own fault in a hop moves on to the next candidate, uncharged", () => {
  // What Hop.build makes of a throw while building a call: the upstream was never called.
  const built = new GatewayError("the gateway could not build its call to upstream up: x", {
    code: "gw.gateway.internal",
  });
  const ending = thrownEnding(built, {
    signal: new AbortController().signal,
    upstream: "up",
    content: false,
  });
  assert.equal(ending.how, "gateway_fault");
  for (const place of PLACES.filter((p) => !p.content)) {
    const v = verdictFor("gateway_fault", place);
    assert.deepEqual(
      [v.step, v.outcome, v.cooldown],
      ["next", "error", undefined],
      JSON.stringify(place),
    );
    assert.deepEqual(
      verdictFor("gateway_fault", { ...place, probing: true }),
      v,
      "a probe is given back",
    );
  }
});

Deno.test("verdict: a replay that diverged moves on to the next candidate, uncharged, and is recorded as such", () => {
  const v = verdictFor("replay_diverged", { content: false, resuming: true, overflow: false });
  assert.deepEqual(v, { step: "next", outcome: "replay_diverged" });
  // Nothing is compared once a replay's content reaches the client: a divergence then is no step.
  const after = verdictFor("replay_diverged", { content: true, resuming: true, overflow: false });
  assert.deepEqual([after.step, after.resumable], ["stop", undefined]);
});

Deno.test("verdict: whose cooldown each failure before content is charged to, the member's, the upstream's or both", () => {
  const charged = Object.fromEntries(
    HOWS.flatMap((how) => {
      const v = verdictFor(how, plain(false));
      return v.cooldown ? [[how, v.cooldown]] : [];
    }),
  );
  assert.deepEqual(charged, {
    // The model is not there: the upstream's other models are not to blame.
    model_missing: "member",
    // The model's or the whole upstream's: both, the upstream's count reset by any model's answer.
    rate_limited: "both",
    overloaded: "both",
    refused: "both",
    stream_error: "both",
    bad_response: "both",
    unfinished: "both",
    idle_timeout: "both",
    first_content_timeout: "both",
    deadline: "both",
    // Nothing of the model is in a connection that fails.
    connection: "upstream",
  });
  // Only a rate limit's Retry-After pauses, and it pauses the member that said it.
  assert.deepEqual(HOWS.filter((how) => verdictFor(how, plain(false)).pause), ["rate_limited"]);
  // A missing model moves on at once, never retried, and ends a started answer like any refusal.
  assert.deepEqual(verdictFor("model_missing", plain(false)), {
    step: "next",
    outcome: "error",
    cooldown: "member",
  });
  assert.deepEqual(verdictFor("model_missing", plain(true)), { step: "stop", outcome: "error" });
});

Deno.test("endings: a 4xx that says the model the hop sent is not there is the member's, any other the caller's", () => {
  const body = JSON.stringify({
    error: { message: "The model `cheap` does not exist", code: "model_not_found" },
  });
  const error = upstreamStatusError(404, { kind: "openai-chat", body });
  assert.equal(statusEnding(404, error, { model: "cheap" }).how, "model_missing");
  assert.equal(statusEnding(404, error, { model: "dear" }).how, "rejected");
  assert.equal(statusEnding(404, error).how, "rejected");
});
