import assert from "node:assert/strict";
import { postJson, startTestGateway, type TestGateway, withGateway } from "./harness.ts";
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
} from "./fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";

// With TEST_SCALE 0.01: idle timeout 30 s = 300 ms, opening hold 15 s = 150 ms, keep-alive
// every 150 ms. Tests that race the hold against an idle timeout, or pace a stream under the
// window, use `wideWindow`: 600 ms is 4x the hold and 6x a 100 ms gap.
const failover = { idle_timeout_secs: 30, failures_to_pause: 3, retries_per_candidate: 1 };
const wideWindow = { ...failover, idle_timeout_secs: 60 };
const ask = (stream: boolean) => ({
  model: "smart",
  stream,
  messages: [{ role: "user", content: "hi" }],
});
const good = { text: ["good ", "answer"], usage: { input: 5, output: 2 } };

/** `count` fake upstreams behind one chat route with this file's failover settings. */
function withUpstreams(
  count: number,
  run: (gw: TestGateway, ups: FakeUpstream[]) => Promise<void>,
  opts: { failover?: ConfigInput["failover"]; dir?: string } = {},
): Promise<void> {
  return withGateway(run, { upstreams: count, failover: opts.failover ?? failover, dir: opts.dir });
}

Deno.test("200 then silence: the next candidate answers; three timeouts pause the silent upstream", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.setHandler(() => silentAfterHeaders);
    b!.setHandler(() => chatStream(good));
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
      const text = await res.text();
      assert.equal(res.status, 200);
      assert.match(text, /good /);
      const { attempts } = await gw.row(res.headers.get("x-request-id")!);
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [["up1", "idle_timeout"], [
        "up2",
        "success",
      ]]);
      assert.ok(attempts[0]!.durationMs! >= 290, "the latency sample covers the full wait");
      assert.equal(
        await a!.calls[i]!.closed,
        "cancelled",
        "the silent upstream's connection is closed",
      );
    }
    assert.equal(gw.cooldowns.isPaused("up1"), true);
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    await res.text();
    assert.equal(a!.calls.length, 3, "a paused upstream is not called");
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(metrics, /pulsegate_upstream_cooldown\{upstream="up1"\} 1/);
    assert.match(
      metrics,
      /pulsegate_idle_timeouts_total\{upstream="up1",phase="before_content"\} 3/,
    );
  }, { failover: { ...failover, pause_secs: 600 } }); // 6 s: outlasts the checks on any machine
});

Deno.test("headers that never come time out the same way, and are not retried", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.enqueue(headersNever);
    b!.enqueue(chatWhole(good));
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, "good answer");
    assert.equal(a!.calls.length, 1, "our own timeout is never retried on the same upstream");
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.outcome, "idle_timeout");
    assert.equal(attempts[0]!.errorCode, "gw.upstream.idle_timeout");
  });
});

Deno.test("no candidate left before headers: timeout_status in OpenAI's format naming the chain", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.enqueue(whitespaceOnly);
    b!.enqueue(headersNever);
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    const json = await res.json();
    assert.equal(res.status, 504);
    assert.equal(res.headers.get("x-pulsegate-error"), "upstream");
    assert.match(json.error.message, /tried: up1 → up2/);
    const { request } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(request.status, 504);
    assert.equal(request.failureSource, "upstream");
  });
});

Deno.test("no candidate left before headers, the last answering unreadably: the upstream's 502, not a timeout", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.enqueue(headersNever);
    b!.enqueue(whitespaceOnly);
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    const json = await res.json();
    assert.equal(res.status, 502);
    assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.upstream.bad_response");
    assert.match(json.error.message, /tried: up1 → up2/);
    const { request } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(request.status, 502);
    assert.equal(request.failureSource, "upstream");
  });
});

Deno.test("past the opening hold: keep-alives, clean failover, error event when nothing is left", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.enqueue(silentAfterHeaders);
    b!.enqueue(silentAfterHeaders);
    const res = await postJson(`${gw.url}/v1/chat/completions`, { ...ask(true) });
    assert.equal(res.status, 200, "headers went out when the hold passed");
    const text = await res.text();
    assert.match(text, /^: keep-alive\n\n/);
    assert.match(text, /data: \{"error":/);
    assert.match(text, /gw\.upstream\.idle_timeout/);
    assert.equal((text.match(/: keep-alive/g) ?? []).length >= 2, true, "comments every 15 s");
  }, { failover: wideWindow });
});

Deno.test("after the hold, failover continues with no byte from the abandoned upstream", async () => {
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.enqueue(keepAlivesOnly(50));
    b!.enqueue(chatStream(good));
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    const text = await res.text();
    assert.doesNotMatch(text, /: ping/, "the abandoned upstream's pings never reach the client");
    assert.match(text, /: keep-alive/);
    assert.match(text, /good /);
    assert.match(text, /\[DONE\]/);
  }, { failover: wideWindow });
});

Deno.test("an upstream 504 is retried on the same candidate", async () => {
  await withUpstreams(1, async (gw, [a]) => {
    a!.enqueue(chatError(504, "upstream gateway timeout"), chatWhole(good));
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.equal(a!.calls.length, 2);
  });
});

Deno.test("a slow but steady stream longer than the idle window is not cut", async () => {
  await withUpstreams(1, async (gw, [a]) => {
    const pieces = Array.from({ length: 12 }, (_, i) => `p${i} `);
    // Gaps of 100 ms under a 600 ms window (6x); the whole stream lasts 1.5 s, 2.5 windows.
    a!.enqueue(chatStream({ text: pieces }, { gap: 100 }));
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    const text = await res.text();
    for (const p of pieces) assert.ok(text.includes(p), p);
    assert.doesNotMatch(text, /"error"/);
  }, { failover: wideWindow });
});

Deno.test("reasoning counts as content; content then silence ends with an event and no pause", async () => {
  await withUpstreams(1, async (gw, [a]) => {
    // Reasoning every 100 ms under the 600 ms window (6x: a cold, loaded process once took over
    // 300 ms to the first), 1.3 s before the text: were reasoning not content, the window would
    // close twice over before "done".
    const reasoning = Array.from({ length: 12 }, (_, i) => `thinking ${i}... `);
    a!.enqueue(chatStream({ reasoning, text: ["done"] }, { gap: 100 }));
    const ok = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    assert.match(await ok.text(), /done/);
    a!.setHandler(() => contentThenSilence("partial"));
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
      const text = await res.text();
      assert.match(text, /partial/);
      assert.match(text, /gw\.upstream\.idle_timeout_mid_stream/);
      const { request } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.errorCode, "gw.upstream.idle_timeout_mid_stream");
    }
    assert.equal(gw.cooldowns.isPaused("up1"), false, "a stall after content is not a failure");
  }, { failover: wideWindow });
});

Deno.test("slots: a full upstream is skipped; every candidate full gives 429 with Retry-After", async () => {
  const ups = [startFakeUpstream(), startFakeUpstream()];
  const config: ConfigInput = {
    // The streams below stay live until released; the window must not end them first.
    failover: { ...failover, idle_timeout_secs: 3600, slot_wait_secs: 0 },
    upstreams: ups.map((u, i) => ({
      id: `up${i + 1}`,
      kind: "openai-chat" as const,
      base_url: u.url,
      max_in_flight: 1,
    })),
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: "m" }, { upstream: "up2", model: "m" }],
    }],
  };
  const gw = await startTestGateway(config);
  // Both slots stay taken until the test releases them, not for a stretch of real time.
  const release = Promise.withResolvers<void>();
  try {
    for (const u of ups) u.setHandler(() => chatStreamHeld(good, release.promise));
    const first = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    const second = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    assert.equal(ups[0]!.calls.length, 1);
    assert.equal(ups[1]!.calls.length, 1, "the full upstream was skipped at once");
    const third = await postJson(`${gw.url}/v1/chat/completions`, ask(true));
    assert.equal(third.status, 429);
    assert.ok(Number(third.headers.get("retry-after")) >= 1);
    assert.equal((await third.json()).error.code, "gw.slots.full");
    release.resolve();
    await first.text();
    await second.text();
    assert.equal(gw.slots.inFlight("up1") + gw.slots.inFlight("up2"), 0);
  } finally {
    release.resolve();
    await gw.stop();
    for (const u of ups) await u.close();
  }
});

Deno.test("cooldown state survives a restart of the gateway", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate-cooldown-" });
  await withUpstreams(2, async (gw, [a, b]) => {
    a!.setHandler(() => chatError(503, "down"));
    b!.setHandler(() => chatWhole(good));
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
      assert.equal(res.status, 200);
      await res.body?.cancel();
    }
    assert.equal(gw.cooldowns.isPaused("up1"), true, "four failures (two tries each) pause it");
  }, { dir, failover: { ...failover, pause_secs: 600, max_pause_secs: 600 } });
  await withUpstreams(2, async (gw, [a, b]) => {
    b!.setHandler(() => chatWhole(good));
    assert.equal(gw.cooldowns.isPaused("up1"), true);
    const res = await postJson(`${gw.url}/v1/chat/completions`, ask(false));
    assert.equal(res.status, 200);
    await res.body?.cancel();
    assert.equal(a!.calls.length, 0, "the paused upstream is skipped after restart");
  }, { dir, failover: { ...failover, pause_secs: 600, max_pause_secs: 600 } });
});
