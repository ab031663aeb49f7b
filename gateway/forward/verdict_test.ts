/**
 * The verdict table (gateway/forward/verdict.ts) against docs/design.md: every fault of the fault
 * table, and every cell of the table itself. Pure: no gateway, no network, milliseconds.
 */
import assert from "node:assert/strict";
import {
  type Final,
  finalStatus,
  type How,
  type Place,
  type ProbeEnd,
  probeEnd,
  retryWait,
  STATUS_ENDINGS,
  verdictFor,
  VERDICTS,
} from "./verdict.ts";
import type { Charge } from "../route/cooldown_levels.ts";
import { sortStatus } from "../formats/upstream_status.ts";
import { decodeBedrockError } from "../formats/bedrock/errors.ts";
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
          // What the client gets when this is the last candidate's failure, as the fault table says.
          if (v.final !== "said") {
            const error = new GatewayError("x", { code: b.code ?? "gw.upstream.error" });
            assert.equal(finalStatus(v.final, error, { timeoutStatus: 504 }), b.status ?? 504);
          }
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
    assert.equal(statusEnding(upstreamStatusError(status)).how, how, String(status));
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
  assert.deepEqual(v, { step: "next", outcome: "replay_diverged", final: "timeout" });
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
    final: "own",
  });
  assert.deepEqual(verdictFor("model_missing", plain(true)), { step: "stop", outcome: "error" });
});

Deno.test("endings: a 4xx that says the model the hop sent is not there is the member's, any other the caller's", () => {
  const body = JSON.stringify({
    error: { message: "The model `cheap` does not exist", code: "model_not_found" },
  });
  const error = upstreamStatusError(404, { kind: "openai-chat", body });
  assert.equal(statusEnding(error, { model: "cheap" }).how, "model_missing");
  assert.equal(statusEnding(error, { model: "dear" }).how, "rejected");
  assert.equal(statusEnding(error).how, "rejected");
});

/**
 * Each row's edges, written out by hand from docs/design.md: `final`, the status the client gets
 * when the row's hop before content is the route's last word (none where the row stops or
 * answers); `overflow`, whether a context-length refusal moves on to a larger window; `probe`,
 * what a probe holding its upstream's level tells when it ends so; `resumes`, whether a break
 * after content is one mid-stream resume mends.
 */
const EDGES: Record<How, { final?: Final; overflow?: true; probe: ProbeEnd; resumes: boolean }> = {
  answered: { probe: "ok", resumes: false },
  rejected: { overflow: true, probe: "released", resumes: false },
  // The member's fault: nothing of its upstream, whose probe goes back.
  model_missing: { final: "own", probe: "released", resumes: false },
  rate_limited: { final: "own", probe: "failed", resumes: true },
  overloaded: { final: "timeout", probe: "failed", resumes: true },
  refused: { final: "timeout", probe: "failed", resumes: true },
  connection: { final: "timeout", probe: "failed", resumes: true },
  stream_error: { final: "said", overflow: true, probe: "failed", resumes: true },
  // The known wrong case: a bad answer from the last candidate was a 504; it is the upstream's 502.
  bad_response: { final: "own", probe: "failed", resumes: true },
  unfinished: { final: "timeout", probe: "failed", resumes: true },
  idle_timeout: { final: "timeout", probe: "failed", resumes: true },
  first_content_timeout: { final: "timeout", probe: "failed", resumes: true },
  deadline: { final: "timeout", probe: "failed", resumes: false },
  caller_input: { probe: "released", resumes: false },
  gateway_fault: { final: "timeout", probe: "released", resumes: false },
  aborted: { probe: "released", resumes: false },
  client_gone: { probe: "released", resumes: false },
  shutdown: { probe: "released", resumes: false },
  hedge_lost: { probe: "released", resumes: false },
  replay_diverged: { final: "timeout", probe: "released", resumes: false },
};

/** A probe holding the upstream's level only: a charge reaches it unless it is the member's alone. */
const upstreamTicket = (charge: Charge) => charge !== "member";
const ALL_PLACES: Place[] = PLACES.flatMap((p) =>
  [false, true].flatMap((probing) => [false, true].map((stopped) => ({ ...p, probing, stopped })))
);

for (const how of HOWS) {
  const edges = EDGES[how];
  Deno.test(`verdict row ${how}: its final status, overflow, probe and resume edges are the table's`, () => {
    const before = verdictFor(how, plain(false));
    assert.equal(before.final, edges.final, "the client's status when it is the last word");
    // Every cell that moves on names what the client gets if nothing is left; no other does.
    for (const place of ALL_PLACES) {
      const v = verdictFor(how, place);
      const movesOn = v.step === "next" || v.step === "retry";
      assert.equal(v.final !== undefined, movesOn, `final in ${JSON.stringify(place)}`);
      // Only an overflow before content picks the next candidate by its window.
      const larger = !place.content && place.overflow && edges.overflow === true;
      assert.equal(v.onward, larger ? "larger_window" : undefined, JSON.stringify(place));
      if (larger) assert.deepEqual([v.step, v.final, v.cooldown], ["next", "own", undefined]);
      // A request stopped itself resumes nothing; otherwise the row says.
      const resumes = place.content && !place.stopped && edges.resumes &&
        !(place.resuming && how === "answered");
      assert.equal(v.resumable === true, resumes, `resumable in ${JSON.stringify(place)}`);
    }
    const content = how === "answered";
    const probed = verdictFor(how, { ...plain(content), probing: true });
    assert.equal(probeEnd(probed, { content, reaches: upstreamTicket }), edges.probe);
  });
}

Deno.test("probe: one never sent is given back uncounted, whatever the table holds", () => {
  assert.equal(probeEnd(null, { content: false, reaches: () => true }), "unsent");
});

Deno.test("status sort: one sort gives both the error's code and the hop's ending, for every status", () => {
  for (let status = 100; status < 600; status++) {
    const error = upstreamStatusError(status, { kind: "openai-chat" });
    const how = statusEnding(error).how;
    assert.equal(error.statusSort, sortStatus(status), String(status));
    assert.equal(how, STATUS_ENDINGS[sortStatus(status)], String(status));
    // Whose fault the error says and how the hop ended agree: only the caller's is passed back.
    assert.equal(error.source === "client", how === "rejected", String(status));
    assert.equal(error.code === "gw.upstream.rate_limited", how === "rate_limited", String(status));
    assert.equal(error.code === "gw.upstream.credentials", status === 401 || status === 403);
  }
  // Retried on the same candidate: a rate limit and an overload, nothing else.
  const retried = [...Array(500).keys()].map((i) => i + 100).filter((status) =>
    verdictFor(statusEnding(upstreamStatusError(status)).how, plain(false)).step === "retry"
  );
  assert.deepEqual(retried, [429, 500, 502, 503, 504, 529]);
});

Deno.test("status sort: a 408 is the upstream's own timeout: failed over at once, charged, never the caller's", () => {
  const error = upstreamStatusError(408, {
    kind: "openai-chat",
    body: '{"error":{"message":"t"}}',
  });
  assert.deepEqual([error.source, error.code, error.status], [
    "upstream",
    "gw.upstream.error",
    502,
  ]);
  const v = verdictFor(statusEnding(error).how, plain(false));
  assert.deepEqual([v.step, v.cooldown, v.final], ["next", "both", "timeout"]);
});

Deno.test("status sort: Bedrock's model failure answered with a 4xx is the upstream's, sorted as its status otherwise", () => {
  const failure = (status: number) =>
    statusEnding(decodeBedrockError(status, '{"message":"boom"}', {
      errorType: "ModelErrorException",
    })).how;
  assert.equal(failure(424), "refused");
  assert.equal(failure(400), "refused");
  assert.equal(failure(500), "overloaded");
  assert.equal(failure(429), "rate_limited");
});

Deno.test("final status: timeout_status unless the last word is final; a bad answer is the upstream's 502", () => {
  const timeout = { timeoutStatus: 504 };
  const bad = new GatewayError("not JSON", { code: "gw.upstream.bad_response" });
  assert.equal(finalStatus(verdictFor("bad_response", plain(false)).final, bad, timeout), 502);
  const oversized = new GatewayError("over the cap", { code: "gw.upstream.oversized" });
  assert.equal(finalStatus("own", oversized, { timeoutStatus: 503 }), 502);
  const overloaded = upstreamStatusError(503, { kind: "openai-chat" });
  assert.equal(finalStatus(verdictFor("overloaded", plain(false)).final, overloaded, timeout), 504);
  const limited = upstreamStatusError(429, { kind: "openai-chat", retryAfterSecs: 2 });
  assert.equal(finalStatus(verdictFor("rate_limited", plain(false)).final, limited, timeout), 429);
  // A stream's error: its own status when it is a rate limit or a prompt too long, else a timeout.
  const said = verdictFor("stream_error", plain(false)).final;
  assert.equal(finalStatus(said, limited, timeout), 429);
  const tooLong = upstreamStatusError(400, {
    kind: "openai-chat",
    body: JSON.stringify({ error: { message: "too long", code: "context_length_exceeded" } }),
  });
  assert.equal(finalStatus(said, tooLong, timeout), 400);
  assert.equal(finalStatus(said, upstreamStatusError(500, { kind: "openai-chat" }), timeout), 504);
  assert.equal(finalStatus(undefined, bad, timeout), 504, "no verdict: a timeout");
});

Deno.test("docs: docs/design.md's verdict table says what the code's table says, row by row", async () => {
  const text = await Deno.readTextFile(new URL("../../docs/design.md", import.meta.url));
  const section = text.slice(text.indexOf("### The verdict table"), text.indexOf("## Pools"));
  const finals: Record<Final, string> = {
    timeout: "`timeout_status`",
    own: "its own status",
    said: "its own if a rate limit, too long or no model, else timeout",
  };
  const documented = new Map<How, string[]>();
  for (const line of section.split("\n").filter((l) => l.startsWith("| `"))) {
    const [name = "", ...cells] = line.split("|").slice(1, -1).map((cell) => cell.trim());
    for (const [, how] of (name.split(":")[0] ?? "").matchAll(/`(\w+)`/g)) {
      assert.ok(!documented.has(how as How), `${how} documented twice`);
      documented.set(how as How, cells);
    }
  }
  assert.deepEqual([...documented.keys()].sort(), [...HOWS].sort());
  for (const how of HOWS) {
    const before = verdictFor(how, plain(false));
    const after = verdictFor(how, plain(true));
    assert.deepEqual(documented.get(how), [
      before.step,
      after.resumable ? `${after.step}, resumable` : after.step,
      before.cooldown ?? "—",
      before.final ? finals[before.final] : "—",
    ], how);
  }
});
