/**
 * Failover at the real defaults (idle timeout 300 s, opening hold 15 s, keep-alive every 15 s,
 * 3 failures to pause, 1 retry per candidate), a whole gateway in virtual time: every switch is
 * asserted at its exact instant.
 */
import assert from "node:assert/strict";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatError,
  chatStream,
  chatStreamHeld,
  chatWhole,
  contentThenSilence,
  headersNever,
  keepAlivesOnly,
  silentAfterHeaders,
  whitespaceOnly,
} from "../fake_upstreams/openai_chat_script.ts";
import type { ConfigInput } from "../../gateway/config/schema.ts";

const IDLE_MS = 300_000;
const HOLD_MS = 15_000;
const ask = (stream: boolean) => ({
  model: "smart",
  stream,
  messages: [{ role: "user", content: "hi" }],
});
const good = { text: ["good ", "answer"], usage: { input: 5, output: 2 } };
const CHAT = "/v1/chat/completions";

async function metrics(v: VirtualGateway): Promise<string> {
  return await v.run((async () => await (await v.fetch("http://127.0.0.1/metrics")).text())());
}

Deno.test("200 then silence: the next candidate answers at 300 s; three timeouts pause the silent upstream", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  a!.setHandler(() => silentAfterHeaders);
  b!.setHandler(() => chatStream(good));
  for (let i = 0; i < 3; i++) {
    const got = await v.send(CHAT, ask(true));
    assert.equal(got.status, 200);
    assert.match(got.text, /good /);
    assert.equal(got.pieces.find((p) => p.text.includes("good "))?.at, IDLE_MS);
    const { attempts } = await v.row(got.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
      ["up1", "idle_timeout"],
      ["up2", "success"],
    ]);
    assert.equal(attempts[0]!.durationMs, IDLE_MS, "the latency sample covers the full wait");
    assert.equal(
      await a!.calls[i]!.closed,
      "cancelled",
      "the silent upstream's connection is closed",
    );
  }
  assert.equal(v.gw.cooldowns.isPaused("up1"), true);
  const got = await v.send(CHAT, ask(true));
  assert.equal(got.pieces.find((p) => p.text.includes("good "))?.at, 0, "straight to up2");
  assert.equal(a!.calls.length, 3, "a paused upstream is not called");
  const text = await metrics(v);
  assert.match(text, /pulsegate_upstream_cooldown\{upstream="up1"\} 1/);
  assert.match(text, /pulsegate_idle_timeouts_total\{upstream="up1",phase="before_content"\} 3/);
});

Deno.test("headers that never come time out the same way at 300 s, and are not retried", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.enqueue(headersNever);
  v.ups[1]!.enqueue(chatWhole(good));
  const got = await v.send(CHAT, ask(false));
  assert.equal(got.status, 200);
  assert.equal(got.headersAt, IDLE_MS);
  assert.equal(JSON.parse(got.text).choices[0].message.content, "good answer");
  assert.equal(v.ups[0]!.calls.length, 1, "our own timeout is never retried on the same upstream");
  const { attempts } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(attempts[0]!.outcome, "idle_timeout");
  assert.equal(attempts[0]!.errorCode, "gw.upstream.idle_timeout");
});

Deno.test("no candidate left before headers: timeout_status in OpenAI's format naming the chain", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.enqueue(whitespaceOnly);
  v.ups[1]!.enqueue(headersNever);
  const got = await v.send(CHAT, ask(false));
  assert.equal(got.status, 504);
  // up1's body of whitespace ends with no content at once; up2 is silent for 300 s.
  assert.equal(got.headersAt, IDLE_MS);
  assert.equal(got.headers.get("x-pulsegate-error"), "upstream");
  assert.match(JSON.parse(got.text).error.message, /tried: up1 → up2/);
  const { request } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(request.status, 504);
  assert.equal(request.failureSource, "upstream");
});

Deno.test("no candidate left before headers, the last answering unreadably: the upstream's 502, not a timeout", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.enqueue(headersNever);
  v.ups[1]!.enqueue(whitespaceOnly);
  const got = await v.send(CHAT, ask(false));
  assert.equal(got.status, 502);
  assert.equal(got.headersAt, IDLE_MS, "up1 given up on at 300 s, up2 unreadable at once");
  assert.equal(got.headers.get("x-pulsegate-error-code"), "gw.upstream.bad_response");
  assert.match(JSON.parse(got.text).error.message, /tried: up1 → up2/);
  const { request } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(request.status, 502);
  assert.equal(request.failureSource, "upstream");
});

Deno.test("past the opening hold: keep-alives every 15 s, clean failover, error event when nothing is left", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.enqueue(silentAfterHeaders);
  v.ups[1]!.enqueue(silentAfterHeaders);
  const got = await v.send(CHAT, ask(true));
  assert.equal(got.status, 200, "headers went out when the hold passed");
  assert.equal(got.headersAt, HOLD_MS);
  assert.match(got.text, /^: keep-alive\n\n/);
  assert.match(got.text, /data: \{"error":/);
  assert.match(got.text, /gw\.upstream\.idle_timeout/);
  assert.equal(got.endedAt, 2 * IDLE_MS, "each candidate given up on at 300 s");
  const keepAlives = got.pieces.filter((p) => p.text === ": keep-alive\n\n").map((p) => p.at);
  assert.deepEqual(
    keepAlives.filter((at) => at % IDLE_MS !== 0),
    Array.from({ length: 40 }, (_, i) => (i + 1) * HOLD_MS).filter((at) => at % IDLE_MS !== 0),
    "a comment every 15 s, across the failover",
  );
});

Deno.test("after the hold, failover continues with no byte from the abandoned upstream", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  v.ups[0]!.enqueue(keepAlivesOnly(5_000));
  v.ups[1]!.enqueue(chatStream(good));
  const got = await v.send(CHAT, ask(true));
  assert.doesNotMatch(got.text, /: ping/, "the abandoned upstream's pings never reach the client");
  assert.match(got.text, /: keep-alive/);
  assert.equal(got.pieces.find((p) => p.text.includes("good "))?.at, IDLE_MS);
  assert.match(got.text, /\[DONE\]/);
});

Deno.test("an upstream 504 is retried on the same candidate", async () => {
  await using v = await startVirtualGateway();
  v.ups[0]!.enqueue(chatError(504, "upstream gateway timeout"), chatWhole(good));
  const got = await v.send(CHAT, ask(false));
  assert.equal(got.status, 200);
  assert.equal(v.ups[0]!.calls.length, 2);
});

Deno.test("a slow but steady stream longer than the idle window is not cut", async () => {
  await using v = await startVirtualGateway();
  const pieces = Array.from({ length: 12 }, (_, i) => `p${i} `);
  // A piece every 100 s: the stream lasts 20 minutes, four idle windows.
  v.ups[0]!.enqueue(chatStream({ text: pieces }, { gap: 100_000 }));
  const got = await v.send(CHAT, ask(true));
  for (const p of pieces) assert.ok(got.text.includes(p), p);
  assert.doesNotMatch(got.text, /"error"/);
  assert.ok(got.endedAt >= 1_200_000, `ran ${got.endedAt} ms`);
});

Deno.test("reasoning counts as content; content then silence ends with an event and no pause", async () => {
  await using v = await startVirtualGateway();
  const a = v.ups[0]!;
  // Reasoning every 100 s, 20 minutes before the text: were reasoning not content, the window
  // would close at 300 s.
  const reasoning = Array.from({ length: 12 }, (_, i) => `thinking ${i}... `);
  a.enqueue(chatStream({ reasoning, text: ["done"] }, { gap: 100_000 }));
  const ok = await v.send(CHAT, ask(true));
  assert.match(ok.text, /done/);
  assert.doesNotMatch(ok.text, /idle_timeout/);
  a.setHandler(() => contentThenSilence("partial"));
  for (let i = 0; i < 3; i++) {
    const got = await v.send(CHAT, ask(true));
    assert.match(got.text, /partial/);
    assert.match(got.text, /gw\.upstream\.idle_timeout_mid_stream/);
    assert.equal(got.endedAt, IDLE_MS);
    const { request } = await v.row(got.headers.get("x-request-id")!);
    assert.equal(request.errorCode, "gw.upstream.idle_timeout_mid_stream");
  }
  assert.equal(v.gw.cooldowns.isPaused("up1"), false, "a stall after content is not a failure");
});

Deno.test("slots: a full upstream is skipped; every candidate full gives 429 with Retry-After", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls): ConfigInput => ({
      failover: { slot_wait_secs: 0 },
      upstreams: urls.map((url, i) => ({
        id: `up${i + 1}`,
        kind: "openai-chat" as const,
        base_url: url,
        max_in_flight: 1,
      })),
      routes: [{
        model: "smart",
        candidates: [{ upstream: "up1", model: "m" }, { upstream: "up2", model: "m" }],
      }],
    }),
  });
  // Both slots stay taken until the test releases them.
  const release = Promise.withResolvers<void>();
  for (const u of v.ups) u.setHandler(() => chatStreamHeld(good, release.promise));
  await v.run((async () => {
    const first = v.exchange(CHAT, ask(true));
    await v.until(() => v.ups[0]!.calls.length === 1, "up1 called");
    const second = v.exchange(CHAT, ask(true));
    await v.until(() => v.ups[1]!.calls.length === 1, "up2 called");
    assert.equal(v.ups[0]!.calls.length, 1, "the full upstream was skipped at once");
    const third = await v.exchange(CHAT, ask(true));
    assert.equal(third.status, 429);
    assert.equal(third.headersAt, 0);
    assert.ok(Number(third.headers.get("retry-after")) >= 1);
    assert.equal(JSON.parse(third.text).error.code, "gw.slots.full");
    release.resolve();
    await first;
    await second;
  })());
  assert.equal(v.gw.slots.inFlight("up1") + v.gw.slots.inFlight("up2"), 0);
});

Deno.test("cooldown state survives a restart of the gateway", async () => {
  const policy = { pause_secs: 600, max_pause_secs: 600 };
  const first = await startVirtualGateway({ upstreams: 2, failover: policy });
  first.ups[0]!.setHandler(() => chatError(503, "down"));
  first.ups[1]!.setHandler(() => chatWhole(good));
  for (let i = 0; i < 2; i++) assert.equal((await first.send(CHAT, ask(false))).status, 200);
  assert.equal(first.gw.cooldowns.isPaused("up1"), true, "four failures (two tries each) pause it");
  first.keepDir();
  await first.stop();
  // A minute later, well inside the 600 s pause.
  first.clock.advance(60_000);
  await using second = await startVirtualGateway({ share: first, failover: policy });
  const calls = second.ups[0]!.calls.length;
  assert.equal(second.gw.cooldowns.isPaused("up1"), true);
  const got = await second.send(CHAT, ask(false));
  assert.equal(got.status, 200);
  assert.equal(second.ups[0]!.calls.length, calls, "the paused upstream is skipped after restart");
});
