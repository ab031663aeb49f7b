/**
 * The live record as a log (docs/design.md "The live record"): what each event does to the
 * request's row, its hops' rows, its metrics and its live state, and that the row is written
 * exactly once whatever ends the request. In-process, on the virtual clock.
 */
import assert from "node:assert/strict";
import type { AttemptRecord, RequestRecord } from "../../db/records.ts";
import { VirtualClock } from "../../tests/virtual_clock.ts";
import { GatewayError } from "../runtime/gateway_error.ts";
import { Metrics } from "../runtime/metrics.ts";
import type { IrRequest } from "../formats/ir.ts";
import type { Billing } from "./billing.ts";
import { type LiveEvent, LiveRequest } from "./live_request.ts";

interface Written {
  /** Each hand-over of the request's row to the sink, as it stood then. */
  requests: RequestRecord[];
  /** Each hand-over of a hop's row, as it stood then. */
  attempts: AttemptRecord[];
}

function start(
  opts: { stream?: boolean; clock?: VirtualClock; refused?: boolean; sessionId?: string } = {},
) {
  const clock = opts.clock ?? new VirtualClock();
  const metrics = new Metrics();
  const written: Written = { requests: [], attempts: [] };
  const live = new LiveRequest({
    id: "r1",
    instanceId: "i1",
    clientFormat: "openai-chat",
    route: null,
    stream: opts.stream ?? true,
    keyId: "k1",
    sessionId: opts.sessionId ?? null,
  }, {
    clock,
    metrics,
    sink: {
      writeRequest: (r) => written.requests.push({ ...r }),
      writeAttempt: (a) => written.attempts.push({ ...a }),
    },
    expendable: opts.refused,
  });
  return { clock, metrics, written, live };
}

/** The rows the sink holds at the end: a closed request row is its last hand-over. */
function closedRows(written: Written): RequestRecord[] {
  return written.requests.filter((r) => r.state === "closed");
}

/** Lets `ms` of virtual time go by. */
async function pass(clock: VirtualClock, ms: number): Promise<void> {
  await clock.run(clock.sleep(ms));
}

const types = (events: readonly LiveEvent[]) => events.map((e) => e.type);

function ir(model: string, opts: { stream?: boolean } = {}): IrRequest {
  return { model, stream: opts.stream ?? true, messages: [] } as unknown as IrRequest;
}

const PRICE: Billing = {
  bill: (hop) => ({ costUsd: (hop.outputTokens ?? 0) / 1000, cacheWriteUsd: null }),
};

Deno.test("live record: parsed names the route, the stream and the session (a named one stands)", () => {
  const { live } = start({ stream: false });
  live.parsed(ir("smart", { stream: true }), { sessionId: "from-prompt" });
  live.routed("smart");
  assert.equal(live.record.route, "smart");
  assert.equal(live.record.stream, true);
  assert.equal(live.record.sessionId, "from-prompt");
  assert.equal(live.metricsRoute, "smart");
  assert.equal(live.conversation?.model, "smart");
  const named = start({ sessionId: "named" }).live;
  named.parsed(ir("smart"), { sessionId: "from-prompt" });
  assert.equal(named.record.sessionId, "named");
});

Deno.test("live record: a hop opens its row; the request names its upstream and the first move", async () => {
  const { clock, live, written } = start();
  await pass(clock, 250);
  const first = live.startAttempt("a", "m-a", { movedFrom: "warm", resumeOffset: 7 });
  assert.equal(first.record.hop, 1);
  assert.equal(first.record.startedAt, live.record.startedAt + 250);
  assert.equal(first.record.resumeOffset, 7);
  assert.equal(written.attempts.length, 1, "the hop's row goes to the sink as it opens");
  assert.deepEqual(
    [live.record.upstream, live.record.upstreamModel, live.record.movedFrom],
    ["a", "m-a", "warm"],
  );
  live.startAttempt("b", "m-b", { movedFrom: "elsewhere" });
  assert.deepEqual(
    [live.record.upstream, live.record.movedFrom],
    ["b", "warm"],
    "the latest hop is the upstream; the first move stands",
  );
  assert.equal(live.state, "waiting_for_headers");
});

Deno.test("live record: headers time the hop once; a stream's 2xx holds its opening", async () => {
  const { clock, live, written } = start({ stream: true });
  const hop = live.startAttempt("a", "m-a");
  await pass(clock, 40);
  hop.headers(503);
  assert.equal(live.state, "waiting_for_headers", "an error status holds nothing");
  assert.deepEqual([hop.record.status, hop.record.headersMs], [503, 40]);
  await pass(clock, 10);
  hop.headers(200);
  assert.deepEqual(
    [hop.record.status, hop.record.headersMs],
    [200, 40],
    "a later call's status, the first one's time",
  );
  assert.equal(live.state, "holding");
  assert.equal(written.attempts.length, 2, "written as it opened and at its first headers");
  const whole = start({ stream: false }).live;
  whole.startAttempt("a", "m-a").headers(200);
  assert.equal(whole.state, "waiting_for_headers", "a whole answer waits for its first byte");
});

Deno.test("live record: the hop that claims the answer is the request's upstream, whichever started last", () => {
  const { live } = start();
  const a = live.startAttempt("a", "m-a", { holdsUsage: true });
  live.startAttempt("b", "m-b", { holdsUsage: true });
  assert.equal(live.record.upstream, "b");
  a.claimed();
  assert.deepEqual([live.record.upstream, live.record.upstreamModel], ["a", "m-a"]);
  assert.equal(live.state, "streaming");
});

Deno.test("live record: a held hop's usage stays on its row until its first content, a loser's for good", async () => {
  const { clock, live } = start();
  const winner = live.startAttempt("a", "m-a", { holdsUsage: true });
  const loser = live.startAttempt("b", "m-b", { holdsUsage: true });
  winner.usage({ inputTokens: 100 });
  loser.usage({ inputTokens: 90 });
  assert.equal(live.record.inputTokens, null, "no hop answers yet");
  await pass(clock, 300);
  winner.firstContent();
  assert.equal(winner.record.firstContentMs, 300);
  assert.equal(live.record.inputTokens, 100, "the winner's held usage went to the request");
  winner.usage({ inputTokens: 100, outputTokens: 12, reasoningTokens: 3 });
  assert.deepEqual(
    [live.record.outputTokens, live.record.reasoningTokens, live.record.usageSource],
    [12, 3, "upstream"],
  );
  assert.equal(loser.record.inputTokens, 90);
  assert.equal(live.record.inputTokens, 100, "the loser's never");
});

Deno.test("live record: the first content sent times the request once and is measured once", async () => {
  const { clock, live, metrics } = start();
  live.routed("smart");
  live.startAttempt("a", "m-a");
  await pass(clock, 1_500);
  live.contentSent();
  await pass(clock, 500);
  live.contentSent();
  assert.equal(live.record.firstContentMs, 1_500);
  assert.equal(live.state, "streaming");
  assert.equal(live.lastContentAt, live.record.startedAt + 2_000);
  assert.deepEqual(metrics.firstContent.get({ route: "smart" }), { count: 1, sum: 1.5 });
  const logged = live.events.length;
  await pass(clock, 700);
  live.frame();
  assert.equal(live.lastContentAt, live.record.startedAt + 2_700, "a frame moves the idle clock");
  assert.equal(live.events.length, logged, "a frame is counted, not logged");
});

Deno.test("live record: a refused count leaves the row rejected and is counted; a hop's reports log as one", () => {
  const { live, metrics } = start();
  const hop = live.startAttempt("a", "m-a");
  hop.firstContent();
  hop.usage({ inputTokens: 10, outputTokens: -5 });
  assert.equal(hop.record.usageSource, "rejected");
  assert.equal(hop.record.outputTokens, null, "the refused count is not taken");
  assert.equal(hop.usageRejected, true);
  assert.equal(metrics.usageRejected.get({ upstream: "a", field: "outputTokens" }), 1);
  hop.usage({ inputTokens: 10, outputTokens: 4 });
  hop.usage({ inputTokens: 10, outputTokens: 9 });
  assert.equal(live.record.outputTokens, 9);
  assert.deepEqual(types(live.events), ["hop", "first_content", "usage"]);
  live.finish({ status: 200 });
  assert.equal(live.record.usageSource, "rejected", "the request's row says so too");
});

Deno.test("live record: an estimate marks its hop; an answering hop's carries onto the request", () => {
  const { live } = start();
  const lost = live.startAttempt("a", "m-a");
  lost.estimate({ input: 50, answered: false });
  assert.deepEqual(
    [lost.record.inputTokens, lost.record.tokensEstimated, lost.record.usageSource],
    [50, true, "estimated"],
  );
  assert.equal(live.record.inputTokens, null);
  const answering = live.startAttempt("b", "m-b");
  answering.firstContent();
  answering.usage({ inputTokens: 60, outputTokens: 5 });
  answering.estimate({ output: 20, answered: true });
  assert.deepEqual(
    [answering.record.outputTokens, live.record.outputTokens, live.record.tokensEstimated],
    [20, 20, true],
    "at least as many as reported",
  );
  answering.estimate({ output: 3, answered: true });
  assert.equal(answering.record.outputTokens, 20, "never below");
});

Deno.test("live record: a hop's end closes its row once: outcome, time, error, price, metrics", async () => {
  const { clock, live, metrics, written } = start();
  live.billWith(PRICE);
  live.routed("smart");
  const hop = live.startAttempt("a", "m-a");
  hop.firstContent();
  hop.usage({ inputTokens: 10, outputTokens: 2_000 });
  await pass(clock, 9_000);
  hop.end("idle_timeout", new GatewayError("silent", { code: "gw.upstream.idle_timeout" }));
  await pass(clock, 1_000);
  hop.end("success");
  assert.deepEqual(
    [hop.record.outcome, hop.record.durationMs, hop.record.errorCode, hop.record.costUsd],
    ["idle_timeout", 9_000, "gw.upstream.idle_timeout", 2],
  );
  assert.equal(hop.ended, true);
  assert.equal(metrics.attempts.get({ upstream: "a", outcome: "idle_timeout" }), 1);
  assert.equal(metrics.cost.get({ route: "smart", upstream: "a" }), 2);
  assert.equal(written.attempts.at(-1)?.outcome, "idle_timeout");
  assert.equal(types(live.events).filter((t) => t === "ended").length, 1, "the second end is not");
});

Deno.test("live record: an answer closes the row at its settlement: status, time, cost, tokens", async () => {
  const { clock, live, metrics, written } = start();
  live.billWith(PRICE);
  live.routed("smart");
  const hop = live.startAttempt("a", "m-a");
  hop.firstContent();
  hop.usage({ inputTokens: 30, outputTokens: 1_000 });
  hop.end("success");
  await pass(clock, 4_000);
  live.end({ status: 200 });
  await pass(clock, 20);
  live.finish();
  const [row] = closedRows(written);
  assert.deepEqual(
    [row?.status, row?.outcome, row?.durationMs, row?.endedAt, row?.costUsd],
    [200, "success", 4_000, live.record.startedAt + 4_000, 1],
  );
  assert.equal(metrics.requests.get({ route: "smart", outcome: "success" }), 1);
  assert.equal(metrics.tokens.get({ upstream: "a", direction: "output" }), 1_000);
  assert.deepEqual(metrics.duration.get({ route: "smart" }), { count: 1, sum: 4 });
});

/** Every way a request ends, and the row each leaves. */
const ENDINGS: {
  name: string;
  end: (live: LiveRequest) => void;
  row: Pick<RequestRecord, "status" | "outcome" | "errorCode">;
  metric?: "disconnects" | "aborts";
}[] = [
  { name: "an answer", end: (l) => l.end({ status: 200 }), row: ok() },
  {
    name: "an error",
    end: (l) => l.end({ status: 502, error: upstreamError() }),
    row: { status: 502, outcome: "error", errorCode: "gw.upstream.error" },
  },
  {
    name: "an operator's abort",
    end: (l) => {
      l.abort(aborted());
      l.end({ status: 499, error: aborted() });
    },
    row: { status: 499, outcome: "error", errorCode: "gw.request.aborted" },
    metric: "aborts",
  },
  {
    name: "the client gone, with no settlement after",
    end: (l) => l.abort(gone()),
    row: { status: 499, outcome: "error", errorCode: "gw.client.disconnected" },
    metric: "disconnects",
  },
  {
    name: "a fault that skipped every settlement",
    end: () => {},
    row: { status: 500, outcome: "error", errorCode: "gw.gateway.internal" },
  },
  {
    name: "an answer the client left after",
    end: (l) => {
      l.end({ status: 200 });
      l.abort(gone());
    },
    row: ok(),
  },
];

for (const ending of ENDINGS) {
  Deno.test(`live record: ${ending.name} writes the closed row exactly once`, () => {
    const { live, written, metrics } = start();
    live.startAttempt("a", "m-a").end("success");
    ending.end(live);
    assert.equal(closedRows(written).length, 0, "nothing closes the row before finish");
    live.finish();
    live.finish();
    live.finish({ status: 201 });
    live.end({ status: 202 });
    const closed = closedRows(written);
    assert.equal(closed.length, 1, "one closed row");
    const row = closed[0]!;
    assert.deepEqual(
      { status: row.status, outcome: row.outcome, errorCode: row.errorCode },
      ending.row,
    );
    assert.equal(live.finished, true);
    assert.equal(types(live.events).filter((t) => t === "settled").length, 1);
    assert.equal(metrics.disconnects.get(), ending.metric === "disconnects" ? 1 : 0);
    assert.equal(metrics.aborts.get(), ending.metric === "aborts" ? 1 : 0);
  });
}

Deno.test("live record: an abort stops the request once, with its first reason", () => {
  const { live } = start();
  live.abort(gone());
  live.abort(aborted());
  assert.equal(live.signal.aborted, true);
  assert.equal((live.signal.reason as GatewayError).code, "gw.client.disconnected");
  assert.deepEqual(types(live.events), ["abort"]);
});

Deno.test("live record: a refused request's row is expendable; reaching an upstream makes it real", () => {
  const { live, written } = start({ refused: true });
  assert.equal(written.requests.length, 1);
  live.startAttempt("a", "m-a");
  live.finish({ status: 200 });
  assert.equal(closedRows(written).length, 1);
});

Deno.test("live record: the rows are a fold of the log: replayed into a new record, the same rows", async () => {
  const { clock, live } = start();
  live.parsed(ir("smart"), { sessionId: "s1" });
  live.routed("smart");
  const a = live.startAttempt("a", "m-a", { holdsUsage: true });
  const b = live.startAttempt("b", "m-b", { holdsUsage: true, movedFrom: "a" });
  await pass(clock, 100);
  a.headers(200);
  b.sent({ droppedHeaders: "x-beta", trace: { spanId: "00f067aa0ba902b7", provider: "openai" } });
  b.headers(200);
  b.usage({ inputTokens: 40 });
  await pass(clock, 200);
  b.claimed();
  b.firstContent();
  live.contentSent();
  b.usage({ inputTokens: 40, outputTokens: 7 });
  a.end("hedge_lost");
  a.estimate({ input: 35, answered: false });
  b.estimate({ output: 9, answered: true });
  await pass(clock, 50);
  b.end("success");
  live.end({ status: 200 });
  live.finish();
  // Times in the log count from the request's start: a record started at the same instant
  // replays them as they were.
  const replayed = start({ clock: new VirtualClock() }).live;
  for (const e of live.events) replayed.append(e);
  replayed.finish();
  const rows = (l: LiveRequest) => ({
    request: withoutTrace(l.record),
    hops: l.attempts.map((h) => withoutTrace(h.record)),
  });
  assert.deepEqual(rows(replayed), rows(live));
  assert.equal(replayed.attempts[1]?.record.trace?.provider, "openai");
});

function withoutTrace<T extends { trace?: unknown }>(record: T): Omit<T, "trace"> {
  const { trace: _, ...row } = record;
  return row;
}

function ok(): Pick<RequestRecord, "status" | "outcome" | "errorCode"> {
  return { status: 200, outcome: "success", errorCode: null };
}

function upstreamError(): GatewayError {
  return new GatewayError("upstream broke off", { code: "gw.upstream.error" });
}

function aborted(): GatewayError {
  return new GatewayError("request aborted by an operator", {
    code: "gw.request.aborted",
    source: "aborted",
    status: 499,
  });
}

function gone(): GatewayError {
  return new GatewayError("client disconnected", {
    code: "gw.client.disconnected",
    source: "client",
    status: 499,
  });
}
