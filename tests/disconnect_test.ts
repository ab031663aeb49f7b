import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { countRequests } from "../db/history_queries.ts";
import { chatRoute, eventually, postJson, startTestGateway } from "./harness.ts";
import {
  chatError,
  chatStream,
  chatWhole,
  headersNever,
} from "./fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { startFakeUpstream } from "./fake_upstreams/server.ts";

const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });
const good = { text: ["fine"], usage: { input: 3, output: 1 } };

Deno.test("a non-streaming caller that times out is logged 499 once, with one attempt", async () => {
  const up = startFakeUpstream({ fallback: () => headersNever });
  const gw = await startTestGateway(chatRoute([up.url], { failover: { idle_timeout_secs: 300 } }));
  try {
    const caller = new AbortController();
    const pending = fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat(false)),
      headers: { "content-type": "application/json", "x-request-id": "leaver" },
      signal: caller.signal,
    });
    // Leaves once the upstream has the request (not after a fixed 100 ms, which a loaded
    // machine can spend before the request even gets there); the 3 s window is far off.
    await eventually(() => up.calls.length === 1);
    caller.abort();
    await assert.rejects(pending);
    await eventually(() => gw.metrics.inflight === 0, { what: "no request in flight" });
    const { request, attempts } = await gw.row("leaver");
    assert.equal(request.status, 499);
    assert.equal(request.errorCode, "gw.client.disconnected");
    assert.equal(request.errorMessage, "client disconnected");
    assert.equal(request.upstream, "up1", "the row names the upstream the caller left");
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0]!.outcome, "client_disconnected");
    assert.equal(gw.metrics.disconnects.get(), 1);
    assert.equal(gw.metrics.inflight, 0);
    assert.equal(await up.calls[0]!.closed, "cancelled");
    assert.equal(up.calls.length, 1, "no retry or failover after the caller left");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a stream abandoned mid-body is logged 499 with the tokens it had billed", async () => {
  const chunks = anthropicFake.streamChunks({ text: ["a", "b"], usage: { input: 11, output: 2 } });
  const up = startFakeUpstream({
    // message_start (with input usage), the text block, then silence.
    fallback: () => ({
      headers: { "content-type": "text/event-stream" },
      body: [...chunks.slice(0, 3).map((send) => ({ send })), { hang: true }],
    }),
  });
  const config: ConfigInput = {
    failover: { idle_timeout_secs: 300 },
    upstreams: [{ id: "claude", kind: "anthropic", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "claude", model: "c" }] }],
  };
  const gw = await startTestGateway(config);
  try {
    const res = await postJson(`${gw.url}/v1/chat/completions`, chat(true), {
      "x-request-id": "half",
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    await eventually(() => gw.metrics.inflight === 0, { what: "no request in flight" });
    const { request, attempts } = await gw.row("half");
    assert.equal(request.status, 499);
    assert.equal(request.errorCode, "gw.client.disconnected");
    assert.equal(request.inputTokens, 11);
    assert.equal(attempts[0]!.outcome, "client_disconnected");
    assert.equal(gw.metrics.disconnects.get(), 1);
    assert.equal(await up.calls[0]!.closed, "cancelled");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a caller who leaves during a retry backoff costs one failure charge, not two", async () => {
  // Retry-After 10 s (the most the gateway waits out) is a 100 ms backoff at the test scale.
  const up = startFakeUpstream({
    fallback: () => ({ ...chatError(503, "busy"), headers: { "retry-after": "10" } }),
  });
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    const caller = new AbortController();
    const pending = fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chat(false)),
      headers: { "content-type": "application/json", "x-request-id": "backoff" },
      signal: caller.signal,
    });
    // The failure is charged before the backoff starts: leave right after it, well inside it.
    await eventually(() => gw.cooldowns.get("up1").consecutiveFailures === 1);
    caller.abort();
    await assert.rejects(pending);
    await eventually(() => gw.metrics.inflight === 0, { what: "no request in flight" });
    const { request, attempts } = await gw.row("backoff");
    assert.equal(request.status, 499);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0]!.outcome, "error");
    assert.equal(gw.cooldowns.get("up1").consecutiveFailures, 1);
    assert.equal(gw.metrics.attempts.get({ upstream: "up1", outcome: "error" }), 1);
    await new Promise((r) => setTimeout(r, 300)); // 3x the backoff: a retry would have come
    assert.equal(up.calls.length, 1, "no retry after the caller left");
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("a normal request is neither marked nor counted as a disconnect", async () => {
  const up = startFakeUpstream();
  const gw = await startTestGateway(chatRoute([up.url]));
  try {
    up.enqueue(chatStream(good), chatWhole(good));
    const s = await postJson(`${gw.url}/v1/chat/completions`, chat(true));
    await s.text();
    const w = await postJson(`${gw.url}/v1/chat/completions`, chat(false));
    await w.text();
    for (const res of [s, w]) {
      const { request } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.status, 200);
      assert.equal(request.errorCode, null);
    }
    assert.equal(gw.metrics.disconnects.get(), 0);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(metrics, /pulsegate_client_disconnects_total 0/);
    assert.match(metrics, /pulsegate_inflight_requests 0/);
    assert.match(metrics, /pulsegate_requests_total\{route="smart",outcome="success"\} 2/);
    assert.match(metrics, /pulsegate_tokens_total\{upstream="up1",direction="input"\} 6/);
    assert.match(metrics, /pulsegate_time_to_first_content_seconds_count\{route="smart"\} 2/);
    for (
      const series of [
        "pulsegate_requests_total",
        "pulsegate_attempts_total",
        "pulsegate_inflight_requests",
        "pulsegate_client_disconnects_total",
        "pulsegate_aborts_total",
        "pulsegate_idle_timeouts_total",
        "pulsegate_upstream_cooldown",
        "pulsegate_time_to_first_content_seconds",
        "pulsegate_request_duration_seconds",
        "pulsegate_tokens_total",
      ]
    ) assert.match(metrics, new RegExp(`# TYPE ${series} `), series);
    assert.match(metrics, /pulsegate_upstream_cooldown\{upstream="up1"\} 0/);
    assert.match(metrics, /pulsegate_attempts_total\{upstream="up1",outcome="success"\} 2/);
  } finally {
    await gw.stop();
    await up.close();
  }
});

Deno.test("200 concurrent requests, half abandoned: in-flight returns to 0, one row each", async () => {
  const up = startFakeUpstream({
    fallback: () => chatStream({ text: ["a", "b", "c", "d"] }, { gap: 40 }),
  });
  const gw = await startTestGateway(chatRoute([up.url], { failover: { idle_timeout_secs: 300 } }));
  try {
    const ids = Array.from({ length: 200 }, (_, i) => `c-${i}`);
    await Promise.all(ids.map(async (id, i) => {
      const caller = new AbortController();
      const stream = i % 2 === 0;
      const res = fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify(chat(stream)),
        headers: { "content-type": "application/json", "x-request-id": id },
        signal: caller.signal,
      });
      if (i % 4 < 2) {
        // Leave once the gateway has the request, at a spread of moments after that.
        let ended = false;
        res.finally(() => (ended = true)).catch(() => {});
        await eventually(() => gw.registry.has(id) || ended, { what: `${id} is live` });
        setTimeout(() => caller.abort(), (i % 7) * 15);
        await res.then((r) => r.text()).catch(() => {});
      } else {
        await (await res).text();
      }
    }));
    await eventually(() => gw.metrics.inflight === 0, { what: "no request in flight" });
    assert.equal(gw.metrics.inflight, 0);
    assert.equal(gw.registry.size, 0);
    assert.equal(gw.slots.inFlight("up1"), 0);
    for (const id of ids) await gw.row(id);
    assert.equal(await countRequests(gw.db), 200, "exactly one row per request");
    const disconnects = gw.metrics.disconnects.get();
    assert.ok(disconnects > 0 && disconnects <= 100, `disconnects: ${disconnects}`);
  } finally {
    await gw.stop();
    await up.close();
  }
});
