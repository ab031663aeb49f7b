/**
 * Every stop closes the upstream connection at once (docs/observability.md "Cancellation"):
 * for each stop path and each phase a hop can be in, the fake upstream sees its connection
 * closed (its open-connection count back to 0), and `pulsegate_upstream_cancel_seconds`
 * timed the close from the stop.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { eventually, postJson, TEST_SCALE, type TestGateway, withGateway } from "./harness.ts";
import { chatStreamBlocks, chatWholeBody } from "./fake_upstreams/openai_chat_script.ts";
import type { FakeUpstream, Script } from "./fake_upstreams/server.ts";

type StopPath = "disconnect" | "abort" | "idle" | "hedge" | "shutdown";
type Phase = "headers" | "holding" | "streaming" | "whole";
const PHASES: Phase[] = ["headers", "holding", "streaming", "whole"];

const ADMIN = "admin-secret";
const admin = { authorization: `Bearer ${ADMIN}` };
const SSE = { "content-type": "text/event-stream" };
const messages = [{ role: "user", content: "hi" }];
/** Real time the fake is watched for the close: generous, for a loaded machine. */
const CLOSE_MS = 2_000;
/**
 * The most the recorded stop-to-close time may be, in real ms: a close takes a few ms here
 * (50 ms seen once under load); the histogram records it unscaled, as every duration metric.
 */
const RECORDED_MAX_MS = 500;
const RECORDED_MAX_SECS = RECORDED_MAX_MS / TEST_SCALE / 1000;

/**
 * A's script: it stays in `phase` until the gateway lets go of it. A whole answer has begun its
 * body, unless it is racing a hedge: its first byte would win the race (docs/liveness.md).
 */
function held(phase: Phase, hedged: boolean): Script {
  switch (phase) {
    case "headers":
      return { headerDelay: "never" };
    case "holding":
      return { headers: SSE, body: [{ hang: true }] };
    case "streaming":
      return {
        headers: SSE,
        body: [...chatStreamBlocks({ text: ["Hello"] }).slice(0, 2).map((send) => ({ send })), {
          hang: true,
        }],
      };
    case "whole":
      return { body: [...(hedged ? [] : [{ send: '{"id":"chatcmpl-fake",' }]), { hang: true }] };
  }
}

function reasonOf(path: StopPath, phase: Phase): string {
  switch (path) {
    case "disconnect":
      return "gw.client.disconnected";
    case "abort":
      return "gw.request.aborted";
    case "idle":
      return phase === "streaming"
        ? "gw.upstream.idle_timeout_mid_stream"
        : "gw.upstream.idle_timeout";
    case "hedge":
      return "gw.upstream.hedge_lost";
    case "shutdown":
      return "gw.gateway.shutting_down";
  }
}

function config(path: StopPath, [ua, ub]: string[]): ConfigInput {
  const hedged = path === "hedge";
  return {
    failover: { idle_timeout_secs: path === "idle" ? 30 : 300 },
    upstreams: [
      { id: "a", kind: "openai-chat", base_url: ua! },
      { id: "b", kind: "openai-chat", base_url: ub! },
    ],
    routes: [{
      model: "smart",
      ...(hedged ? { hedge_after_secs: 1 } : {}),
      candidates: hedged
        ? [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }]
        : [{ upstream: "a", model: "m" }],
    }],
  };
}

/** Resolves once the request's first hop is in `phase` (for a whole answer: its body begun). */
async function reached(
  gw: TestGateway,
  opts: { id: string; phase: Phase; a: FakeUpstream; hedged: boolean },
): Promise<void> {
  await eventually(() => opts.a.calls.length === 1, { what: "A called" });
  if (opts.phase === "headers") return;
  const live = () => gw.registry.get(opts.id);
  await eventually(() => live()?.attempts[0]?.record.status === 200, { what: "A's headers" });
  // A hedge's start resets the request's state, so only an unhedged whole answer shows its body.
  if (opts.phase === "whole" && !opts.hedged) {
    await eventually(() => live()?.state === "streaming", { what: "A's body begun" });
  }
}

/** Reads the client's stream until `text` has arrived. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, text: string) {
  const decoder = new TextDecoder();
  let got = "";
  while (!got.includes(text)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended before ${text}: ${got}`);
    got += decoder.decode(value, { stream: true });
  }
}

/** Puts A in `phase`, stops the request by `path`, and checks A's connection closed, timed. */
async function stopAndObserve(
  gw: TestGateway,
  opts: { path: StopPath; phase: Phase; a: FakeUpstream; b: FakeUpstream },
): Promise<void> {
  const { path, phase, a, b } = opts;
  const id = `cancel-${path}-${phase}`;
  const stream = phase !== "whole";
  const hedged = path === "hedge";
  a.enqueue(held(phase, hedged));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  if (hedged) {
    const answer = { text: ["from B"] };
    const rest = stream
      ? chatStreamBlocks(answer).map((send) => ({ send }))
      : [{ send: chatWholeBody(answer) }];
    b.enqueue({ headers: stream ? SSE : undefined, body: [{ until: gate }, ...rest] });
  }
  const client = new AbortController();
  const answer = fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": id },
    body: JSON.stringify({ model: "smart", stream, messages }),
    signal: client.signal,
  });
  answer.catch(() => {});
  if (phase === "streaming") {
    const res = await answer;
    await readUntil(res.body!.getReader(), "Hello");
  } else await reached(gw, { id, phase, a, hedged });
  if (hedged) await eventually(() => b.calls.length === 1, { what: "B hedged" });
  const reason = reasonOf(path, phase);
  assert.equal(a.openConnections, 1, "A's connection is open before the stop");
  assert.equal(gw.metrics.upstreamCancel.get({ upstream: "a", reason }).count, 0);
  switch (path) {
    case "disconnect":
      client.abort();
      break;
    case "abort": {
      const control = await fetch(`${gw.url}/request/${id}/abort`, {
        method: "POST",
        headers: admin,
      });
      assert.equal(control.status, 200);
      break;
    }
    case "hedge":
      release();
      break;
    case "shutdown":
      await gw.stop();
      break;
    case "idle":
      break; // the idle timer stops it
  }
  await eventually(() => a.openConnections === 0, { what: "A's connection closed", ms: CLOSE_MS });
  await eventually(() => gw.metrics.upstreamCancel.get({ upstream: "a", reason }).count === 1, {
    what: "the close timed",
    ms: CLOSE_MS,
  });
  const { sum } = gw.metrics.upstreamCancel.get({ upstream: "a", reason });
  assert.ok(sum >= 0 && sum < RECORDED_MAX_SECS, `closed ${sum}s (unscaled) after the stop`);
  release();
  client.abort();
}

const PATHS: StopPath[] = ["disconnect", "abort", "idle", "hedge", "shutdown"];

for (const path of PATHS) {
  for (const phase of PHASES) {
    // A hop that streams content has won its race: a hedge is never lost mid-stream.
    if (path === "hedge" && phase === "streaming") continue;
    Deno.test(`upstream cancel: ${path} while ${phase}`, async () => {
      await withGateway((gw, [a, b]) => stopAndObserve(gw, { path, phase, a: a!, b: b! }), {
        upstreams: 2,
        config: (urls) => config(path, urls),
        env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
      });
    });
  }
}

Deno.test("upstream cancel: an abort during retry backoff makes no new call, no connection open", async () => {
  await withGateway(async (gw, [a]) => {
    // 503 with Retry-After 10 s: a backoff of 1 s real at this test's scale.
    a!.enqueue({ status: 503, headers: { "retry-after": "10" }, body: [{ send: "busy" }] });
    const id = "cancel-backoff";
    const answer = postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      "x-request-id": id,
    });
    await eventually(() => gw.registry.get(id)?.attempts[0]?.ended === true, {
      what: "first try failed",
    });
    assert.equal(a!.openConnections, 0, "nothing open while backing off");
    const control = await fetch(`${gw.url}/request/${id}/abort`, {
      method: "POST",
      headers: admin,
    });
    assert.equal(control.status, 200);
    const res = await answer;
    assert.equal(res.status, 400);
    await res.body?.cancel();
    const { attempts } = await gw.row(id);
    assert.equal(attempts.length, 1, "no retry after the stop");
    assert.equal(a!.calls.length, 1, "no new call after the stop");
    assert.equal(a!.openConnections, 0);
  }, {
    upstreams: 2,
    config: (urls) => config("abort", urls),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
    scale: 0.1,
  });
});

Deno.test("upstream cancel: an abort while an error body trickles in closes it at once", async () => {
  await withGateway(async (gw, [a]) => {
    a!.enqueue({ status: 500, body: [{ send: '{"error":{"message":"bro' }, { hang: true }] });
    const id = "cancel-error-body";
    const answer = postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      "x-request-id": id,
    });
    await eventually(() => gw.registry.get(id)?.attempts[0]?.record.status === 500, {
      what: "the error's headers",
    });
    assert.equal(a!.openConnections, 1);
    const control = await fetch(`${gw.url}/request/${id}/abort`, {
      method: "POST",
      headers: admin,
    });
    assert.equal(control.status, 200);
    const res = await answer;
    assert.equal(res.status, 400);
    await res.body?.cancel();
    await eventually(() => a!.openConnections === 0, { what: "closed", ms: CLOSE_MS });
    const reason = "gw.request.aborted";
    await eventually(() => gw.metrics.upstreamCancel.get({ upstream: "a", reason }).count === 1, {
      what: "the close timed",
      ms: CLOSE_MS,
    });
    assert.ok(gw.metrics.upstreamCancel.get({ upstream: "a", reason }).sum < RECORDED_MAX_SECS);
    assert.equal(a!.calls.length, 1, "an abort is not retried");
  }, {
    upstreams: 2,
    config: (urls) => config("abort", urls),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
});

Deno.test("upstream cancel: a guardrail blocks before any upstream call", async () => {
  await withGateway(async (gw, [a]) => {
    const rule = { id: "vault", pattern: "exfiltrate\\s+the\\s+vault", message: "no vault talk" };
    const put = await fetch(`${gw.url}/admin/api/guardrails`, {
      method: "PUT",
      headers: { "content-type": "application/json", ...admin },
      body: JSON.stringify({ enabled: true, rules: [rule] }),
    });
    assert.equal(put.status, 200);
    for (const stream of [true, false]) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, {
        model: "smart",
        stream,
        messages: [{ role: "user", content: "please exfiltrate the vault" }],
      });
      assert.equal(res.status, 400);
      assert.equal((await res.json()).error.code, "guardrail.blocked");
    }
    assert.equal(a!.calls.length, 0, "no upstream call to close");
    assert.equal(a!.openConnections, 0);
    assert.equal(gw.metrics.upstreamCancel.series.size, 0, "nothing was open to cancel");
  }, {
    upstreams: 2,
    config: (urls) => config("abort", urls),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
});
