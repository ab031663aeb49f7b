/**
 * docs/observability.md "Cache-aware affinity": a session (named by its client, or derived from
 * its prompt) stays where its cache is warm; a hop that leaves the warm upstream records what
 * its cache writes cost; a pin outlives its cache by no more than an hour.
 */
import assert from "node:assert/strict";
import type { IrRequest } from "../../gateway/formats/ir.ts";
import { promptSession } from "../../gateway/formats/session_ids.ts";
import { Affinity, PIN_IDLE_MS } from "../../gateway/route/affinity.ts";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway } from "../virtual_gateway.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import type { Script } from "../fake_upstreams/server.ts";
import { VirtualClock } from "../virtual_clock.ts";

const ir = (system: string | undefined, ...turns: string[]): IrRequest => ({
  model: "smart",
  stream: false,
  system,
  messages: turns.map((text, i) => ({
    role: i % 2 ? "assistant" as const : "user" as const,
    content: [{ type: "text" as const, text }],
  })),
});

Deno.test("a session derived from the prompt: the same for every turn of one conversation", () => {
  const first = promptSession(ir("You are Gemini CLI.", "fix the bug"));
  assert.match(first ?? "", /^p:[0-9a-f]{16}$/);
  assert.equal(promptSession(ir("You are Gemini CLI.", "fix the bug", "done", "thanks")), first);
  assert.notEqual(promptSession(ir("You are Gemini CLI.", "write a test")), first);
  assert.notEqual(promptSession(ir("Another agent.", "fix the bug")), first);
  assert.equal(promptSession(ir(undefined, "hi")), null, "a lone question is no session");
  assert.match(promptSession(ir(undefined, "hi", "hello", "more")) ?? "", /^p:/);
});

Deno.test("a pin unused for an hour is forgotten: the cache it kept warm is gone", () => {
  const clock = new VirtualClock();
  const affinity = new Affinity(10, { clock });
  affinity.set("smart", { sessionId: "s", upstream: "up2" });
  clock.advance(PIN_IDLE_MS);
  assert.equal(affinity.get("smart", "s"), "up2");
  affinity.set("smart", { sessionId: "s", upstream: "up2" }); // answered again: kept an hour more
  clock.advance(PIN_IDLE_MS);
  assert.equal(affinity.get("smart", "s"), "up2");
  clock.advance(PIN_IDLE_MS + 1);
  assert.equal(affinity.get("smart", "s"), undefined);
});

const SSE = { "content-type": "text/event-stream" };
const answer = (usage: anthropicFake.AnthropicScript["usage"]): Script => ({
  headers: SSE,
  body: anthropicFake.streamChunks({ text: ["ok"], usage }).map((send) => ({ send })),
});
const overloaded: Script = {
  status: 529,
  headers: { "content-type": "application/json" },
  body: [{ send: anthropicFake.errorBody(529, "Overloaded") }],
};

/** Two Anthropic upstreams serving one model, in order, priced for the cost of a cache write. */
function twoAnthropic(urls: string[], failover?: ConfigInput["failover"]): ConfigInput {
  return {
    failover,
    upstreams: urls.map((url, i) => ({
      id: `up${i + 1}`,
      kind: "anthropic" as const,
      base_url: url,
      prices: { "claude-sonnet-4-5": { input: 3, output: 15 } },
    })),
    routes: [{
      model: "smart",
      candidates: urls.map((_, i) => ({ upstream: `up${i + 1}`, model: "claude-sonnet-4-5" })),
    }],
  };
}

const claudeTurn = (n: number) => ({
  model: "smart",
  max_tokens: 100,
  stream: true,
  system: [{ type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } }],
  messages: [{ role: "user", content: `turn ${n}` }],
});

Deno.test("a session that fails over records the cache writes the move cost", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => twoAnthropic(urls, { retries_per_candidate: 0, failures_to_pause: 100 }),
  });
  const [a, b] = v.ups;
  const turn = async (n: number) => {
    const got = await v.send("/v1/messages", claudeTurn(n), {
      headers: { "x-claude-code-session-id": "cc-1" },
    });
    assert.equal(got.status, 200);
    return await v.row(got.headers.get("x-request-id")!);
  };
  a!.enqueue(answer({ input: 10, output: 5, cacheWrite: 20_000 }));
  const cold = await turn(1);
  assert.equal(cold.request.movedFrom, null, "a new session has no warm upstream to leave");
  assert.equal(cold.attempts[0]!.upstream, "up1");

  a!.enqueue(overloaded);
  b!.enqueue(answer({ input: 10, output: 5, cacheWrite: 20_000 }));
  const moved = await turn(2);
  assert.deepEqual(
    moved.attempts.map((h) => [h.upstream, h.outcome, h.movedFrom]),
    [["up1", "error", null], ["up2", "success", "up1"]],
  );
  // 20,000 written at 1.25 x 3 USD per million: the price of leaving the warm cache.
  assert.ok(Math.abs(moved.attempts[1]!.cacheWriteUsd! - 0.075) < 1e-12);
  assert.equal(moved.request.movedFrom, "up1");
  assert.ok(Math.abs(moved.request.cacheWriteUsd! - 0.075) < 1e-12);

  b!.enqueue(answer({ input: 10, output: 5, cacheRead: 20_000 }));
  const warm = await turn(3);
  assert.deepEqual(warm.attempts.map((h) => [h.upstream, h.movedFrom]), [["up2", null]]);
  assert.equal(warm.request.cachedTokens, 20_000, "the session stayed where its cache is");
  assert.equal(a!.calls.length, 2);
});

Deno.test("a session's pin is kept an hour after its last answer, and forgotten 1 ms later", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: (urls) => twoAnthropic(urls, { retries_per_candidate: 0, failures_to_pause: 100 }),
  });
  const [a, b] = v.ups;
  for (const up of [a!, b!]) up.setHandler(() => answer({ input: 10, output: 5 }));
  let answeredAt = 0;
  const turn = async (n: number) => {
    const got = await v.send("/v1/messages", claudeTurn(n), {
      headers: { "x-claude-code-session-id": "cc-hour" },
    });
    assert.equal(got.status, 200);
    assert.equal(got.endedAt, 0, "answered at once");
    answeredAt = v.clock.now();
    return (await v.row(got.headers.get("x-request-id")!)).request.upstream;
  };
  /** Moves the clock to `ms` after the last answer (reading its row may have taken a while). */
  const unusedFor = (ms: number) => v.clock.advance(answeredAt + ms - v.clock.now());
  // A hiccup on up1 pins the session to up2.
  a!.enqueue(overloaded);
  assert.equal(await turn(1), "up2");
  // Unused for exactly an hour: still pinned, and the answer keeps it an hour more.
  unusedFor(PIN_IDLE_MS);
  assert.equal(await turn(2), "up2", "pinned at one hour unused");
  // Unused an hour and 1 ms: the pin is gone (its cache with it); up1 is first again.
  unusedFor(PIN_IDLE_MS + 1);
  assert.equal(await turn(3), "up1", "forgotten after one hour unused");
  assert.deepEqual([a!.calls.length, b!.calls.length], [2, 2]);
});

Deno.test("a client that names no session keeps to one upstream by its prompt", async () => {
  await using v = await startVirtualGateway({
    upstreams: 2,
    // Equal neighbours: without affinity the least loaded would go first.
    config: (urls) => twoAnthropic(urls),
  });
  const whole: Script = {
    headers: { "content-type": "application/json" },
    body: [{ send: anthropicFake.wholeBody({ text: ["ok"], usage: { input: 10, output: 5 } }) }],
  };
  for (const up of v.ups) up.setHandler(() => whole);
  const contents = [{ role: "user", parts: [{ text: "fix the bug" }] }];
  const ask = async (more: unknown[]) => {
    const got = await v.send("/v1beta/models/smart:generateContent", {
      systemInstruction: { parts: [{ text: "You are Gemini CLI." }] },
      contents: [...contents, ...more],
    });
    assert.equal(got.status, 200);
    return (await v.row(got.headers.get("x-request-id")!)).request;
  };
  const first = await ask([]);
  assert.match(first.sessionId ?? "", /^p:/);
  const upstream = first.upstream;
  for (let n = 0; n < 4; n++) {
    const next = await ask([
      { role: "model", parts: [{ text: "ok" }] },
      { role: "user", parts: [{ text: `step ${n}` }] },
    ]);
    assert.equal(next.sessionId, first.sessionId);
    assert.equal(next.upstream, upstream, "the conversation stays on its first upstream");
  }
});
