/**
 * Every stop closes the upstream connection at once (docs/observability.md "Cancellation"):
 * for each stop path and each phase a hop can be in, the fake upstream sees its connection
 * closed (its open-connection count back to 0), and `pulsegate_upstream_cancel_seconds`
 * timed the close from the stop: in virtual time, the same instant (0 s).
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import { chatStreamBlocks, chatWholeBody } from "../fake_upstreams/openai_chat_script.ts";
import type { FakeUpstream, Script } from "../fake_upstreams/server.ts";
import { SHUTDOWN_GRACE_MS } from "../../gateway/start/start_gateway.ts";

type StopPath = "disconnect" | "abort" | "idle" | "hedge" | "shutdown";
type Phase = "headers" | "holding" | "streaming" | "whole";
const PHASES: Phase[] = ["headers", "holding", "streaming", "whole"];

const ADMIN = "admin-secret";
const admin = { authorization: `Bearer ${ADMIN}` };
const SSE = { "content-type": "text/event-stream" };
const messages = [{ role: "user", content: "hi" }];
const CHAT = "/v1/chat/completions";

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
    failover: { idle_timeout_secs: path === "idle" ? 300 : 3600 },
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
  v: VirtualGateway,
  opts: { id: string; phase: Phase; a: FakeUpstream; hedged: boolean },
): Promise<void> {
  await v.until(() => opts.a.calls.length === 1, "A called");
  if (opts.phase === "headers") return;
  const live = () => v.gw.registry.get(opts.id);
  await v.until(() => live()?.attempts[0]?.record.status === 200, "A's headers");
  if (opts.phase === "streaming") {
    await v.until(() => live()?.state === "streaming", "A's content passed on");
  }
  // A hedge's start resets the request's state, so only an unhedged whole answer shows its body.
  if (opts.phase === "whole" && !opts.hedged) {
    await v.until(() => live()?.state === "streaming", "A's body begun");
  }
}

/** Puts A in `phase`, stops the request by `path`, and checks A's connection closed at once. */
async function stopAndObserve(
  v: VirtualGateway,
  opts: { path: StopPath; phase: Phase; a: FakeUpstream; b: FakeUpstream },
): Promise<void> {
  const { path, phase, a, b } = opts;
  const { gw } = v;
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
  const reason = reasonOf(path, phase);
  let closedAfterMs = -1;
  await v.run((async () => {
    const answer = v.exchange(CHAT, { model: "smart", stream, messages }, {
      headers: { "x-request-id": id },
      signal: client.signal,
    });
    await reached(v, { id, phase, a, hedged });
    if (hedged) {
      await v.until(() => b.calls.length === 1, "B hedged");
      assert.equal(v.clock.sinceStart >= 1_000, true, "B started at hedge_after_secs");
    }
    assert.equal(a.openConnections, 1, "A's connection is open before the stop");
    assert.equal(gw.metrics.upstreamCancel.get({ upstream: "a", reason }).count, 0);
    const stoppedAt = v.clock.now();
    void a.calls[0]!.closed.then(() => (closedAfterMs = v.clock.elapsed(stoppedAt)));
    switch (path) {
      case "disconnect":
        client.abort();
        break;
      case "abort": {
        const control = await v.fetch(`http://127.0.0.1/request/${id}/abort`, {
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
        await gw.shutdown();
        break;
      case "idle":
        break; // the idle timer stops it
    }
    await v.until(() => a.openConnections === 0, "A's connection closed");
    await v.until(
      () => gw.metrics.upstreamCancel.get({ upstream: "a", reason }).count === 1,
      "the close timed",
    );
    release();
    client.abort();
    await answer.catch(() => {});
  })());
  const { sum } = gw.metrics.upstreamCancel.get({ upstream: "a", reason });
  assert.equal(sum, 0, "closed the instant it was stopped");
  if (path === "disconnect" || path === "abort" || path === "hedge") {
    assert.equal(closedAfterMs, 0, "A saw its connection close at the stop's instant");
  }
  if (path === "shutdown") {
    assert.equal(closedAfterMs, SHUTDOWN_GRACE_MS, "stopped when the shutdown's grace ran out");
  }
  if (path === "idle") {
    const { attempts } = await v.row(id);
    assert.equal(attempts[0]!.durationMs, 300_000, "given up on at 300 s of silence");
  }
}

const PATHS: StopPath[] = ["disconnect", "abort", "idle", "hedge", "shutdown"];

for (const path of PATHS) {
  for (const phase of PHASES) {
    // A hop that streams content has won its race: a hedge is never lost mid-stream.
    if (path === "hedge" && phase === "streaming") continue;
    Deno.test(`upstream cancel: ${path} while ${phase}`, async () => {
      await using v = await startVirtualGateway({
        upstreams: 2,
        config: (urls) => config(path, urls),
        env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
      });
      await stopAndObserve(v, { path, phase, a: v.ups[0]!, b: v.ups[1]! });
    });
  }
}

/** Posts to the control endpoint that aborts request `id`. */
function abortRequest(v: VirtualGateway, id: string): Promise<Response> {
  return v.fetch(`http://127.0.0.1/request/${id}/abort`, { method: "POST", headers: admin });
}

async function withTwo(run: (v: VirtualGateway) => Promise<void>): Promise<void> {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => config("abort", urls),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
  await run(v);
}

Deno.test("upstream cancel: an abort during retry backoff makes no new call, no connection open", async () => {
  await withTwo(async (v) => {
    const a = v.ups[0]!;
    // 503 with Retry-After 10 s: the retry would come 10 s later.
    a.enqueue({ status: 503, headers: { "retry-after": "10" }, body: [{ send: "busy" }] });
    const id = "cancel-backoff";
    const res = await v.run((async () => {
      const answer = v.exchange(CHAT, { model: "smart", messages }, {
        headers: { "x-request-id": id },
      });
      await v.until(() => v.gw.registry.get(id)?.attempts[0]?.ended === true, "first try failed");
      assert.equal(a.openConnections, 0, "nothing open while backing off");
      await v.clock.sleep(5_000);
      const control = await abortRequest(v, id);
      assert.equal(control.status, 200);
      return await answer;
    })());
    assert.equal(res.status, 400);
    assert.ok(res.headersAt >= 5_000 && res.headersAt < 10_000, "told at the abort, mid-backoff");
    const { attempts } = await v.row(id);
    assert.equal(attempts.length, 1, "no retry after the stop");
    await v.run(v.clock.sleep(20_000));
    assert.equal(a.calls.length, 1, "no new call after the stop, even past the backoff");
    assert.equal(a.openConnections, 0);
  });
});

Deno.test("upstream cancel: an abort while an error body trickles in closes it at once", async () => {
  await withTwo(async (v) => {
    const a = v.ups[0]!;
    a.enqueue({ status: 500, body: [{ send: '{"error":{"message":"bro' }, { hang: true }] });
    const id = "cancel-error-body";
    const reason = "gw.request.aborted";
    const res = await v.run((async () => {
      const answer = v.exchange(CHAT, { model: "smart", messages }, {
        headers: { "x-request-id": id },
      });
      await v.until(
        () => v.gw.registry.get(id)?.attempts[0]?.record.status === 500,
        "the error's headers",
      );
      assert.equal(a.openConnections, 1);
      const control = await abortRequest(v, id);
      assert.equal(control.status, 200);
      const res = await answer;
      await v.until(() => a.openConnections === 0, "closed");
      await v.until(
        () => v.gw.metrics.upstreamCancel.get({ upstream: "a", reason }).count === 1,
        "the close timed",
      );
      return res;
    })());
    assert.equal(res.status, 400);
    assert.equal(v.gw.metrics.upstreamCancel.get({ upstream: "a", reason }).sum, 0);
    assert.equal(a.calls.length, 1, "an abort is not retried");
  });
});

Deno.test("upstream cancel: a guardrail blocks before any upstream call", async () => {
  await withTwo(async (v) => {
    const a = v.ups[0]!;
    const rule = { id: "vault", pattern: "exfiltrate\\s+the\\s+vault", message: "no vault talk" };
    const put = await v.run(v.fetch("http://127.0.0.1/admin/api/guardrails", {
      method: "PUT",
      headers: { "content-type": "application/json", ...admin },
      body: JSON.stringify({ enabled: true, rules: [rule] }),
    }));
    assert.equal(put.status, 200);
    await v.run(put.body?.cancel() ?? Promise.resolve());
    for (const stream of [true, false]) {
      const res = await v.send(CHAT, {
        model: "smart",
        stream,
        messages: [{ role: "user", content: "please exfiltrate the vault" }],
      });
      assert.equal(res.status, 400);
      assert.equal(JSON.parse(res.text).error.code, "guardrail.blocked");
    }
    assert.equal(a.calls.length, 0, "no upstream call to close");
    assert.equal(a.openConnections, 0);
    assert.equal(v.gw.metrics.upstreamCancel.series.size, 0, "nothing was open to cancel");
  });
});
