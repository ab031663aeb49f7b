/**
 * A client who leaves (docs/design.md "Abort and disconnect"): logged 499 once, its upstream let
 * go of at once, never retried; a normal request is not counted as one. A whole gateway in
 * virtual time: each leave happens at a chosen instant.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { countRequests } from "../../db/history_queries.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatError,
  chatStream,
  chatWhole,
  headersNever,
} from "../fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";

const messages = [{ role: "user", content: "hi" }];
const chat = (stream: boolean) => ({ model: "smart", stream, messages });
const good = { text: ["fine"], usage: { input: 3, output: 1 } };
const CHAT = "/v1/chat/completions";

async function metrics(v: VirtualGateway): Promise<string> {
  return await v.run((async () => await (await v.fetch("http://127.0.0.1/metrics")).text())());
}

Deno.test("a non-streaming caller that leaves after 100 s is logged 499 once, with one attempt", async () => {
  await using v = await startVirtualGateway();
  const up = v.ups[0]!;
  up.setHandler(() => headersNever);
  await v.send(CHAT, chat(false), {
    headers: { "x-request-id": "leaver" },
    leaveAfterMs: 100_000,
  });
  assert.equal(v.gw.metrics.inflight, 0);
  const { request, attempts } = await v.row("leaver");
  assert.equal(request.status, 499);
  assert.equal(request.errorCode, "gw.client.disconnected");
  assert.equal(request.errorMessage, "client disconnected");
  assert.equal(request.upstream, "up1", "the row names the upstream the caller left");
  assert.equal(request.durationMs, 100_000, "ended the instant the caller left");
  assert.equal(attempts.length, 1);
  assert.equal(attempts[0]!.outcome, "client_disconnected");
  assert.equal(v.gw.metrics.disconnects.get(), 1);
  assert.equal(await up.calls[0]!.closed, "cancelled");
  assert.equal(up.calls.length, 1, "no retry or failover after the caller left");
});

Deno.test("a stream abandoned mid-body is logged 499 with the tokens it had billed", async () => {
  await using v = await startVirtualGateway({
    config: ([url]): ConfigInput => ({
      upstreams: [{ id: "claude", kind: "anthropic", base_url: url! }],
      routes: [{ model: "smart", candidates: [{ upstream: "claude", model: "c" }] }],
    }),
  });
  const up = v.ups[0]!;
  const chunks = anthropicFake.streamChunks({ text: ["a", "b"], usage: { input: 11, output: 2 } });
  // message_start (with input usage), the text block, then silence.
  up.setHandler(() => ({
    headers: { "content-type": "text/event-stream" },
    body: [...chunks.slice(0, 3).map((send) => ({ send })), { hang: true }],
  }));
  const got = await v.send(CHAT, chat(true), {
    headers: { "x-request-id": "half" },
    leaveAfterMs: 1_000,
  });
  assert.ok(got.pieces.length > 0, "the first content came before the caller left");
  assert.equal(v.gw.metrics.inflight, 0);
  const { request, attempts } = await v.row("half");
  assert.equal(request.status, 499);
  assert.equal(request.errorCode, "gw.client.disconnected");
  assert.equal(request.inputTokens, 11);
  assert.equal(attempts[0]!.outcome, "client_disconnected");
  assert.equal(v.gw.metrics.disconnects.get(), 1);
  assert.equal(await up.calls[0]!.closed, "cancelled");
});

Deno.test("a caller who leaves during a retry backoff costs one failure charge, not two", async () => {
  await using v = await startVirtualGateway();
  const up = v.ups[0]!;
  // Retry-After 10 s: the most the gateway waits out. The caller leaves 5 s into it.
  up.setHandler(() => ({ ...chatError(503, "busy"), headers: { "retry-after": "10" } }));
  await v.send(CHAT, chat(false), { headers: { "x-request-id": "backoff" }, leaveAfterMs: 5_000 });
  assert.equal(v.gw.metrics.inflight, 0);
  const { request, attempts } = await v.row("backoff");
  assert.equal(request.status, 499);
  assert.equal(attempts.length, 1);
  assert.equal(attempts[0]!.outcome, "error");
  assert.equal(v.gw.cooldowns.get("up1").consecutiveFailures, 1);
  assert.equal(v.gw.metrics.attempts.get({ upstream: "up1", outcome: "error" }), 1);
  await v.run(v.clock.sleep(30_000)); // past the backoff: a retry would have come by now
  assert.equal(up.calls.length, 1, "no retry after the caller left");
});

Deno.test("a normal request is neither marked nor counted as a disconnect", async () => {
  await using v = await startVirtualGateway();
  const up = v.ups[0]!;
  up.enqueue(chatStream(good), chatWhole(good));
  const s = await v.send(CHAT, chat(true));
  const w = await v.send(CHAT, chat(false));
  for (const res of [s, w]) {
    const { request } = await v.row(res.headers.get("x-request-id")!);
    assert.equal(request.status, 200);
    assert.equal(request.errorCode, null);
  }
  assert.equal(v.gw.metrics.disconnects.get(), 0);
  const text = await metrics(v);
  assert.match(text, /pulsegate_client_disconnects_total 0/);
  assert.match(text, /pulsegate_inflight_requests 0/);
  assert.match(text, /pulsegate_requests_total\{route="smart",outcome="success"\} 2/);
  assert.match(text, /pulsegate_tokens_total\{upstream="up1",direction="input"\} 6/);
  assert.match(text, /pulsegate_time_to_first_content_seconds_count\{route="smart"\} 2/);
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
  ) assert.match(text, new RegExp(`# TYPE ${series} `), series);
  assert.match(text, /pulsegate_upstream_cooldown\{upstream="up1"\} 0/);
  assert.match(text, /pulsegate_attempts_total\{upstream="up1",outcome="success"\} 2/);
});

Deno.test("200 concurrent requests, half abandoned: in-flight returns to 0, one row each", async () => {
  await using v = await startVirtualGateway();
  // A piece every 40 s: each answer lasts two minutes.
  v.ups[0]!.setHandler(() => chatStream({ text: ["a", "b", "c", "d"] }, { gap: 40_000 }));
  const ids = Array.from({ length: 200 }, (_, i) => `c-${i}`);
  await v.run(Promise.all(ids.map((id, i) =>
    v.exchange(CHAT, chat(i % 2 === 0), {
      headers: { "x-request-id": id },
      // Half leave, at a spread of moments: at once, or 15 s to 90 s in.
      ...(i % 4 < 2 ? { leaveAfterMs: (i % 7) * 15_000 } : {}),
    }).catch(() => null)
  )));
  assert.equal(v.gw.metrics.inflight, 0);
  assert.equal(v.gw.registry.size, 0);
  assert.equal(v.gw.slots.inFlight("up1"), 0);
  for (const id of ids) await v.row(id);
  assert.equal(await countRequests(v.gw.db), 200, "exactly one row per request");
  const disconnects = v.gw.metrics.disconnects.get();
  assert.ok(disconnects > 0 && disconnects <= 100, `disconnects: ${disconnects}`);
});
