/**
 * Retries and cooldown at their real defaults (docs/design.md "Cooldown"): a retry 0.5 s after a
 * failure, 3 failures in a row pause an upstream for 60 s, each failed half-open probe doubles
 * the pause up to its 600 s cap, and one probe at a time tests an upstream whose pause ended.
 * A whole gateway in virtual time: each pause is asserted to the millisecond.
 */
import assert from "node:assert/strict";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatError,
  chatStream,
  chatStreamBlocks,
  chatWhole,
  chatWholeBody,
  headersNever,
} from "../fake_upstreams/openai_chat_script.ts";
import type { Handler } from "../fake_upstreams/server.ts";

const messages = [{ role: "user", content: "hi" }];
const whole = { model: "smart", messages };
const good = { text: ["fine"], usage: { input: 1, output: 1 } };
const PAUSE_MS = 60_000;
const MAX_PAUSE_MS = 600_000;

/** `answer`, noting the virtual instant of each call. */
function timed(v: VirtualGateway, at: number[], answer: Handler): Handler {
  return (call) => {
    at.push(v.clock.sinceStart);
    return answer(call);
  };
}

Deno.test("our credential refused (401/403) fails over at once and counts for cooldown", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  a!.setHandler(() => chatError(401, "bad key"));
  b!.setHandler(() => chatWhole(good));
  const got = await v.send("/v1/chat/completions", whole);
  assert.equal(got.status, 200);
  assert.equal(got.headersAt, 0, "no wait before the next candidate");
  assert.equal(a!.calls.length, 1, "not retried");
  assert.equal(v.gw.cooldowns.get("up1").consecutiveFailures, 1);
  const { attempts } = await v.row(got.headers.get("x-request-id")!);
  assert.equal(attempts[0]!.errorCode, "gw.upstream.credentials");
});

Deno.test("a 5xx is retried on its candidate 0.5 s later", async () => {
  await using v = await startVirtualGateway();
  const at: number[] = [];
  let calls = 0;
  v.ups[0]!.setHandler(timed(v, at, () => calls++ ? chatWhole(good) : chatError(503, "busy")));
  const got = await v.send("/v1/chat/completions", whole);
  assert.equal(got.status, 200);
  assert.deepEqual(at.map((t) => t - at[0]!), [0, 500]);
  assert.equal(got.headersAt, 500);
});

Deno.test("three failures pause an upstream for 60 s: skipped at 59.999 s, probed at 60 s", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  const at: number[] = [];
  a!.setHandler(timed(v, at, () => chatError(503, "down")));
  b!.setHandler(() => chatWhole(good));
  // A try and its retry 0.5 s later; then the third failure, at 0.5 s, pauses up1. Its request's
  // retry, 0.5 s later, still goes to up1 and fails; then up2 answers.
  for (let i = 0; i < 2; i++) {
    assert.equal((await v.send("/v1/chat/completions", whole)).status, 200);
  }
  assert.deepEqual(at, [0, 500, 500, 1000]);
  const pausedAt = at[2]!;
  const state = v.gw.cooldowns.get("up1");
  assert.equal(
    v.clock.elapsed(v.clock.now() - v.clock.sinceStart, state.pausedUntil!),
    pausedAt + PAUSE_MS,
  );
  assert.match(state.reason ?? "", /3 failures in a row/);
  // 1 ms before the pause ends: still passed over.
  v.clock.advance(pausedAt + PAUSE_MS - 1 - v.clock.sinceStart);
  assert.equal(v.gw.cooldowns.isPaused("up1"), true);
  await v.send("/v1/chat/completions", whole);
  assert.equal(a!.calls.length, 4, "not called during its pause");
  v.clock.advance(1);
  assert.equal(v.gw.cooldowns.halfOpen("up1"), true, "half-open at 60 s exactly");
  a!.setHandler(timed(v, at, () => chatWhole({ text: ["back"] })));
  const probe = await v.send("/v1/chat/completions", whole);
  assert.equal(JSON.parse(probe.text).choices[0].message.content, "back");
  assert.equal(at.at(-1), pausedAt + PAUSE_MS, "probed at 60 s");
  assert.equal(v.gw.cooldowns.phase("up1"), "ok", "the probe's success closes it");
});

Deno.test("each failed probe doubles the pause: 60, 120, 240, 480, then 600 s, its cap", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  const at: number[] = [];
  a!.setHandler(timed(v, at, () => chatError(503, "down")));
  b!.setHandler(() => chatWhole(good));
  for (let i = 0; i < 2; i++) await v.send("/v1/chat/completions", whole);
  const origin = v.clock.now() - v.clock.sinceStart;
  // The third failure (at.[2]) paused it; each probe then fails at the instant the pause ends.
  let failedAt = at[2]!;
  const pauses: number[] = [];
  for (let round = 0; round < 6; round++) {
    const until = v.clock.elapsed(origin, v.gw.cooldowns.get("up1").pausedUntil!);
    pauses.push(until - failedAt);
    v.clock.advance(until - v.clock.sinceStart);
    const calls = a!.calls.length;
    await v.send("/v1/chat/completions", whole);
    assert.equal(a!.calls.length, calls + 1, "one probe, not retried: its failure pauses again");
    assert.equal(at.at(-1), until, "probed the instant its pause ended");
    failedAt = until;
    assert.match(v.gw.cooldowns.get("up1").reason ?? "", /probe/);
  }
  assert.deepEqual(pauses, [60_000, 120_000, 240_000, 480_000, MAX_PAUSE_MS, MAX_PAUSE_MS]);
});

Deno.test("half-open after the pause: one request probes, the others go elsewhere meanwhile", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  a!.setHandler(() => chatError(503, "down"));
  b!.setHandler(() => chatStream({ text: ["from b"] }));
  for (let i = 0; i < 2; i++) await v.send("/v1/chat/completions", whole);
  v.clock.advance(v.gw.cooldowns.get("up1").pausedUntil! - v.clock.now());
  // The probe answers 10 s after it is sent: meanwhile it is the only request up1 gets.
  a!.setHandler(() => ({ body: [{ wait: 10_000 }, { send: chatWholeBody({ text: ["back"] }) }] }));
  const before = a!.calls.length;
  const answers = await v.run(Promise.all(
    [0, 1000, 2000].map(async (delay) => {
      await v.clock.sleep(delay);
      return await v.exchange("/v1/chat/completions", { ...whole, stream: true });
    }),
  ));
  assert.equal(a!.calls.length - before, 1, "one probe");
  assert.equal(answers.filter((r) => /back/.test(r.text)).length, 1);
  assert.equal(answers.filter((r) => /from b/.test(r.text)).length, 2, "the others skipped it");
  assert.equal(answers[0]!.endedAt, 10_000, "the first request was the probe");
  assert.equal(v.gw.cooldowns.phase("up1"), "ok");
});

Deno.test("a 429's Retry-After pauses the member that said it, not its upstream; a single candidate ignores cooldown", async () => {
  await using v = await startVirtualGateway();
  const a = v.ups[0]!;
  a.enqueue({ ...chatError(429, "slow down"), headers: { "retry-after": "600" } });
  const limited = await v.send("/v1/chat/completions", whole);
  assert.equal(limited.status, 429, "all upstreams rate-limited stays a 429");
  assert.ok(Number(limited.headers.get("retry-after")) >= 1);
  assert.equal(a.calls.length, 1, "a Retry-After over 10 s is not waited out");
  // Rate limits are mostly per model (docs/design.md "Cooldown"): up1's other models go on.
  assert.equal(v.gw.cooldowns.isPaused("up1/model-1"), true);
  assert.equal(v.gw.cooldowns.get("up1/model-1").pausedUntil! - v.clock.now(), 600_000);
  assert.equal(v.gw.cooldowns.isPaused("up1"), false);
  a.enqueue(chatWhole(good));
  const res = await v.send("/v1/chat/completions", whole);
  assert.equal(res.status, 200, "the only candidate is tried although paused");
  assert.equal(v.gw.cooldowns.isPaused("up1/model-1"), false, "one success resets it");
});

Deno.test("every candidate paused: fail open, the soonest-free first", async () => {
  await using v = await startVirtualGateway({ upstreams: 2 });
  const [a, b] = v.ups;
  a!.setHandler(() => chatWhole(good));
  b!.setHandler(() => chatWhole(good));
  v.gw.cooldowns.pauseFor("up1", 500);
  v.gw.cooldowns.pauseFor("up2", 100);
  const res = await v.send("/v1/chat/completions", whole);
  assert.equal(res.status, 200);
  assert.deepEqual([a!.calls.length, b!.calls.length], [0, 1]);
});

Deno.test("whole_answer_deadline cascades without retrying at 20 s each, with a recovery hint", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    failover: {
      idle_timeout_secs: 3600,
      whole_answer_deadline: { base_secs: 10, per_output_token_ms: 100, max_secs: 90 },
    },
  });
  for (const up of v.ups) {
    up.setHandler(() => ({ headerDelay: 100, body: [{ wait: 80_000 }, { send: "{}" }] }));
  }
  // 10 s + 100 tokens × 100 ms = 20 s per candidate.
  const got = await v.send("/v1/chat/completions", { ...whole, max_tokens: 100 });
  const body = JSON.parse(got.text);
  assert.equal(got.status, 504);
  assert.equal(got.headers.get("x-pulsegate-error"), "timeout");
  assert.equal(body.error.code, "gw.upstream.deadline");
  assert.match(body.error.message, /stream: true/);
  assert.match(body.error.message, /max_tokens/);
  assert.deepEqual(v.ups.map((u) => u.calls.length), [1, 1], "cascaded, never retried");
  assert.equal(got.headersAt, 40_000, "two 20 s deadlines");
});

Deno.test("timeout_status 503 replaces 504 for deployments behind picky proxies", async () => {
  await using v = await startVirtualGateway({ failover: { timeout_status: 503 } });
  v.ups[0]!.setHandler(() => headersNever);
  const got = await v.send("/v1/chat/completions", whole);
  assert.equal(got.status, 503);
  assert.equal(got.headersAt, 300_000, "at the 300 s idle timeout");
  assert.equal(JSON.parse(got.text).error.code, "gw.upstream.idle_timeout");
});

Deno.test("a retried last candidate's opening waits for content: the client sees one answer start", async () => {
  // The opening hold has answered the headers (15 s) when the first attempt sends its role chunk
  // and breaks; a retry is still to come, so that chunk must be held like any other candidate's,
  // or the retry's own role chunk reaches the client as a second start.
  // No usage chunk: one the client did not ask for is not passed on.
  const plain = { text: ["fine"] };
  const blocks = chatStreamBlocks(plain);
  await using v = await startVirtualGateway({ failover: { idle_timeout_secs: 3600 } });
  const a = v.ups[0]!;
  a.enqueue({
    headers: { "content-type": "text/event-stream" },
    body: [{ wait: 20_000 }, { send: blocks[0]! }, { wait: 200 }, { reset: true }],
  });
  a.enqueue(chatStream(plain));
  const got = await v.send("/v1/chat/completions", { ...whole, stream: true });
  assert.equal(got.status, 200, "the opening hold answered the headers");
  assert.equal(got.headersAt, 15_000);
  // The gateway's own keep-alives run until content, so they may come between the blocks.
  const text = got.text.replaceAll(": keep-alive\n\n", "");
  assert.equal(a.calls.length, 2, "retried once");
  assert.equal(text, blocks.join(""), "the retry's answer, byte for byte, and nothing else");
  assert.equal(got.endedAt, 20_700, "the retry 0.5 s after the break at 20.2 s");
  const { attempts } = await v.row(got.headers.get("x-request-id")!);
  assert.deepEqual(attempts.map((x) => x.outcome), ["error", "success"]);
});
