/**
 * The 16 scenarios of a public gateway fault-injection scorecard, against a
 * whole gateway in virtual time (tests/virtual_gateway.ts) at the real
 * durations (idle timeout 300 s, the scenario's own 20 s and 15 s, Retry-After
 * 2 s, a pause of an hour), with the official openai SDK streaming as the
 * client. Each route has a primary and a fallback. Whatever
 * the fault, three things must hold (checked for every scenario):
 *
 * - never a truncated or spliced "success": an answer that completes is the
 *   whole answer of exactly one upstream, and a cut answer ends with the
 *   client format's error event, its text a prefix of one upstream's answer;
 * - never a hang: every request ends within SCENARIO_LIMIT_MS of virtual time;
 * - never a prefill error shown to the client.
 *
 * Then each scenario says what it must come to: who answered, or the error
 * code, the history rows (which hops ran and why each ended), and where time
 * is the point, the exact instant each upstream was called.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { startVirtualGateway } from "../virtual_gateway.ts";
import type { FakeUpstream, Handler, Script } from "../fake_upstreams/server.ts";
import {
  chatError,
  chatStream,
  chatStreamBlocks,
  headersNever,
  openAiErrorBody,
  slowFirstToken,
} from "../fake_upstreams/openai_chat_script.ts";

/** A request that takes longer than this (virtual ms: two idle timeouts) has hung. */
const SCENARIO_LIMIT_MS = 600_000;
/** The default idle timeout (docs/liveness.md). */
const IDLE_MS = 300_000;
const TOKENS = 60;

/** `p0 p1 … p59 `: each upstream's answer is told apart from the other's, token by token. */
const tokens = (who: string, n = TOKENS) => Array.from({ length: n }, (_, i) => `${who}${i} `);
const ANSWERS = { p: tokens("p").join(""), f: tokens("f").join("") };

const answer = (who: "p" | "f"): Script => chatStream({ text: tokens(who) });

/** The role chunk and `n` content chunks of a 60-token answer, then `end`. */
function partial(n: number, end: Script["body"]): Script {
  const blocks = chatStreamBlocks({ text: tokens("p") }).slice(0, 1 + n);
  return {
    headers: { "content-type": "text/event-stream" },
    body: [...blocks.map((send) => ({ send })), ...(end ?? [])],
  };
}

/**
 * A fallback that refuses a prefill, as recent Claude models do, and answers the original request
 * the way the primary's model does: first deterministically (temperature 0, a seed), the
 * primary's answer token for token, which a replay matches; then sampled, an answer that parts
 * from it after 30 tokens.
 */
function rejectsPrefillReplays(): Handler {
  let asked = 0;
  return (call) => {
    const messages = (call.json as { messages: { role: string }[] }).messages;
    if (messages.at(-1)?.role === "assistant") {
      return chatError(400, "This model does not support assistant message prefill.");
    }
    return asked++ === 0
      ? answer("p")
      : chatStream({ text: [...tokens("p", 30), ...tokens("q", TOKENS - 30)] });
  };
}

/**
 * A fallback that continues a prefill the way a model does: the request ends with the assistant
 * text the client already has, and the answer is the rest of that same answer.
 */
const continues: Handler = (call) => {
  const last = (call.json as { messages: { role: string; content: string }[] }).messages.at(-1);
  if (last?.role !== "assistant" || !ANSWERS.p.startsWith(last.content)) return answer("f");
  return chatStream({ text: [ANSWERS.p.slice(last.content.length)] });
};

/** Answers by the number of calls so far: the n-th call gets `scripts[n]`, later ones the last. */
function inTurn(...scripts: Script[]): Handler {
  let n = 0;
  return () => scripts[Math.min(n++, scripts.length - 1)]!;
}

const CONTEXT_REFUSAL: Script = {
  status: 400,
  body: [{
    send: openAiErrorBody({
      message: "This model's maximum context length is 128000 tokens. However, your messages " +
        "resulted in 131072 tokens. Please reduce the length of the messages.",
      type: "invalid_request_error",
      param: "messages",
      code: "context_length_exceeded",
    }),
  }],
};

type Hop = [upstream: "p" | "f", outcome: string, code: string | null];

/** What one request must come to. */
interface Outcome {
  /** The upstream whose whole answer the client gets; absent when the request fails. */
  answer?: "p" | "f";
  /** The request's error code in history, when it fails. */
  error?: string;
  /** The history rows of the request's hops, in order. */
  hops: Hop[];
  /** Tokens of the primary's answer the client read before its stream's error event. */
  read?: number;
  /** The error the client got before any stream: its status and OpenAI code. */
  client?: { status: number; code: string };
}

interface Scenario {
  /** Its row in docs/liveness.md "The fault-injection scorecard". */
  doc: string;
  name: string;
  primary: Handler;
  fallback?: Handler;
  failover?: ConfigInput["failover"];
  route?: {
    first_content_timeout_secs?: number;
    on_context_overflow?: "next";
    resume_after_content?: "prefill" | "replay" | "auto";
  };
  /** The fallback candidate says it continues a prefill (`accepts_prefill`). */
  prefill?: boolean;
  windows?: [number, number];
  /** One outcome per request, sent one after the other. */
  outcomes: Outcome[];
  /** The calls each fake must have had in the end, when that is part of the point. */
  calls?: { p?: number; f?: number };
  /**
   * When time is the point: the virtual ms from its request's start at which each call of each
   * fake was made, over all the scenario's requests in order.
   */
  callsAt?: { p?: number[]; f?: number[] };
  /** The primary ends paused for this many virtual ms from its first call. */
  primaryPausedMs?: number;
}

const SCENARIOS: Scenario[] = [
  {
    doc: "429 with Retry-After",
    name: "429 with Retry-After: waited out, then the same candidate answers",
    primary: inTurn(
      { ...chatError(429, "slow down"), headers: { "retry-after": "2" } },
      answer("p"),
    ),
    outcomes: [{
      answer: "p",
      hops: [["p", "error", "gw.upstream.rate_limited"], ["p", "success", null]],
    }],
    // The retry waits out the 2 s asked for, to the millisecond.
    callsAt: { p: [0, 2_000], f: [] },
  },
  {
    doc: "persistent 429 / persistent 503",
    name: "persistent 429: retried once, then the fallback answers",
    primary: () => ({ ...chatError(429, "slow down"), headers: { "retry-after": "1" } }),
    outcomes: [{
      answer: "f",
      hops: [
        ["p", "error", "gw.upstream.rate_limited"],
        ["p", "error", "gw.upstream.rate_limited"],
        ["f", "success", null],
      ],
    }],
  },
  {
    doc: "persistent 429 / persistent 503",
    name: "persistent 503: retried once, then the fallback answers",
    primary: () => chatError(503, "overloaded"),
    outcomes: [{
      answer: "f",
      hops: [
        ["p", "error", "gw.upstream.error"],
        ["p", "error", "gw.upstream.error"],
        ["f", "success", null],
      ],
    }],
  },
  {
    doc: "one 500",
    name: "one 500: the retry on the same candidate answers",
    primary: inTurn(chatError(500, "oops"), answer("p")),
    outcomes: [{
      answer: "p",
      hops: [["p", "error", "gw.upstream.error"], ["p", "success", null]],
    }],
  },
  {
    doc: "TCP reset before content",
    name: "TCP reset before any content: retried once, then the fallback answers",
    primary: () => ({ headers: { "content-type": "text/event-stream" }, body: [{ reset: true }] }),
    outcomes: [{
      answer: "f",
      hops: [
        ["p", "error", "gw.upstream.unreachable"],
        ["p", "error", "gw.upstream.unreachable"],
        ["f", "success", null],
      ],
    }],
  },
  {
    doc: "no response",
    name: "no response: the idle timeout gives up on it, the fallback answers",
    primary: () => headersNever,
    outcomes: [{
      answer: "f",
      hops: [["p", "idle_timeout", "gw.upstream.idle_timeout"], ["f", "success", null]],
    }],
    // Given up on at the default 300 s of silence, not before.
    callsAt: { p: [0], f: [IDLE_MS] },
  },
  {
    doc: "slow first token (20 s), limit 15 s",
    name: "slow first token (20 s) with first_content_timeout_secs 15: the fallback answers",
    // The first token would come at 20 s, keep-alives until then.
    primary: (call) => slowFirstToken(call, { ms: 20_000, text: tokens("p") }),
    route: { first_content_timeout_secs: 15 },
    outcomes: [{
      answer: "f",
      hops: [["p", "idle_timeout", "gw.upstream.first_content_timeout"], ["f", "success", null]],
    }],
    // Given up on at the limit's 15 s, not at the token's 20 s.
    callsAt: { p: [0], f: [15_000] },
  },
  {
    doc: "stream cut after 40 of 60 tokens",
    name: "stream cut after 40 of 60 tokens: the fallback continues it, one whole answer",
    primary: () => partial(40, [{ reset: true }]),
    fallback: continues,
    route: { resume_after_content: "prefill" },
    prefill: true,
    outcomes: [{
      answer: "p",
      hops: [["p", "error", "gw.upstream.error"], ["f", "resumed", null]],
    }],
    calls: { f: 1 },
  },
  {
    doc: "stream stall after 20 tokens",
    name: "stream stall after 20 tokens: the idle timeout gives up, the fallback continues it",
    primary: () => partial(20, [{ hang: true }]),
    fallback: continues,
    route: { resume_after_content: "prefill" },
    prefill: true,
    outcomes: [{
      answer: "p",
      hops: [
        ["p", "idle_timeout", "gw.upstream.idle_timeout_mid_stream"],
        ["f", "resumed", null],
      ],
    }],
    calls: { f: 1 },
    callsAt: { p: [0], f: [IDLE_MS] },
  },
  {
    doc: "malformed chunk before content",
    name: "malformed chunk before content: the fallback answers",
    primary: () => partial(0, [{ send: "data: {not json\n\n" }, { hang: true }]),
    outcomes: [{
      answer: "f",
      hops: [["p", "error", "gw.upstream.bad_response"], ["f", "success", null]],
    }],
  },
  {
    doc: "no `[DONE]` and no finish reason",
    name: "no [DONE] and no finish reason after content: an error event, not a success",
    primary: () => partial(TOKENS, []),
    outcomes: [{
      error: "gw.upstream.incomplete",
      hops: [["p", "error", "gw.upstream.incomplete"]],
    }],
    calls: { f: 0 },
  },
  {
    doc: "context length exceeded",
    name: "context length exceeded with on_context_overflow: the larger window answers",
    primary: () => CONTEXT_REFUSAL,
    route: { on_context_overflow: "next" },
    windows: [128_000, 1_000_000],
    outcomes: [{
      answer: "f",
      hops: [["p", "error", "gw.upstream.rejected"], ["f", "success", null]],
    }],
  },
  {
    doc: "content filter (400)",
    name: "content filter: the provider's refusal is the caller's, not tried elsewhere",
    primary: () => ({
      status: 400,
      body: [{
        send: openAiErrorBody({
          message: "Your request was rejected as a result of our safety system.",
          type: "invalid_request_error",
          code: "content_policy_violation",
        }),
      }],
    }),
    outcomes: [{
      error: "gw.upstream.rejected",
      client: { status: 400, code: "content_policy_violation" },
      hops: [["p", "error", "gw.upstream.rejected"]],
    }],
    calls: { f: 0 },
  },
  {
    doc: "fallback that rejects prefill",
    name: "fallback that rejects prefill, with auto: it replays the request; a matching answer " +
      "is continued, a diverging one ends with the primary's cut",
    primary: () => partial(40, [{ reset: true }]),
    fallback: rejectsPrefillReplays(),
    // The fallback takes no prefill (it is not marked `accepts_prefill`): "auto" replays on it.
    route: { resume_after_content: "auto" },
    outcomes: [
      {
        // Its answer matched the 40 tokens the client had: the other 20 are relayed.
        answer: "p",
        hops: [["p", "error", "gw.upstream.error"], ["f", "resumed", null]],
      },
      {
        // Sampled, it parted after 30 tokens: nothing of it reached the client, which is told of
        // the primary's cut.
        error: "gw.upstream.error",
        read: 40,
        hops: [
          ["p", "error", "gw.upstream.error"],
          ["f", "replay_diverged", "gw.upstream.replay_diverged"],
        ],
      },
    ],
    calls: { f: 2 },
  },
  {
    doc: "flapping primary",
    name: "flapping primary: each answer whole, from one upstream, no pause while it recovers",
    primary: inTurn(
      chatError(503, "down"),
      answer("p"),
      chatError(503, "down"),
      answer("p"),
      chatError(503, "down"),
      answer("p"),
    ),
    failover: { retries_per_candidate: 0, failures_to_pause: 2 },
    outcomes: [
      { answer: "f", hops: [["p", "error", "gw.upstream.error"], ["f", "success", null]] },
      { answer: "p", hops: [["p", "success", null]] },
      { answer: "f", hops: [["p", "error", "gw.upstream.error"], ["f", "success", null]] },
      { answer: "p", hops: [["p", "success", null]] },
    ],
  },
  {
    doc: "fail-over accounting",
    name: "fail-over accounting: the rows say which hops ran and why, and cooldown follows",
    // A Retry-After too long to wait out pauses the primary for its hour; the fallback's 500 is
    // retried.
    primary: () => ({ ...chatError(429, "quota"), headers: { "retry-after": "3600" } }),
    fallback: inTurn(chatError(500, "oops"), answer("f")),
    failover: { max_pause_secs: 3600 },
    outcomes: [
      {
        answer: "f",
        hops: [
          ["p", "error", "gw.upstream.rate_limited"],
          ["f", "error", "gw.upstream.error"],
          ["f", "success", null],
        ],
      },
      // The primary is paused for its Retry-After: the next request goes straight to the fallback.
      { answer: "f", hops: [["f", "success", null]] },
    ],
    calls: { p: 1, f: 3 },
    primaryPausedMs: 3_600_000,
  },
];

function config(s: Scenario, urls: { p: string; f: string }): ConfigInput {
  const [pWindow, fWindow] = s.windows ?? [];
  return {
    failover: { retries_per_candidate: 1, ...s.failover },
    upstreams: [
      { id: "p", kind: "openai-chat", base_url: urls.p },
      { id: "f", kind: "openai-chat", base_url: urls.f },
    ],
    routes: [{
      model: "smart",
      ...s.route,
      candidates: [
        { upstream: "p", model: "primary", context_window: pWindow },
        {
          upstream: "f",
          model: "fallback",
          context_window: fWindow,
          accepts_prefill: s.prefill,
        },
      ],
    }],
  };
}

/** What the client got: the text it read, and the error that ended it, if one did. */
async function ask(
  client: OpenAI,
  id: string,
): Promise<{ text: string; error: unknown }> {
  let text = "";
  try {
    const stream = await client.chat.completions.create({
      model: "smart",
      messages: [{ role: "user", content: "count" }],
      stream: true,
    }, { headers: { "x-request-id": id } });
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    return { text, error: null };
  } catch (error) {
    return { text, error };
  }
}

async function runScenario(s: Scenario, n: number): Promise<void> {
  /** Each call's instant, in virtual ms from the start of the request it belongs to. */
  const at = { p: [] as number[], f: [] as number[] };
  let requestStart = 0;
  let firstCallAt = 0;
  const timed = (who: "p" | "f", handler: Handler): Handler => (call) => {
    if (who === "p" && !at.p.length) firstCallAt = v.clock.now();
    at[who].push(v.clock.sinceStart - requestStart);
    return handler(call);
  };
  await using v = await startVirtualGateway({
    upstreams: 2,
    config: ([p, f]) => config(s, { p: p!, f: f! }),
  });
  const [p, f] = v.ups as [FakeUpstream, FakeUpstream];
  p.setHandler(timed("p", s.primary));
  f.setHandler(timed("f", s.fallback ?? (() => answer("f"))));
  const client = new OpenAI({
    baseURL: `${v.url}/v1`,
    apiKey: "unused",
    maxRetries: 0,
    fetch: v.fetch,
  });
  for (const [i, want] of s.outcomes.entries()) {
    const id = `scorecard-${n}-${i}`;
    requestStart = v.clock.sinceStart;
    const got = await v.run(ask(client, id), { limitMs: SCENARIO_LIMIT_MS });
    const { request, attempts } = await v.row(id);
    assertHonest(got, { request: i });
    if (want.answer) {
      assert.equal(got.error, null, `request ${i} should have been answered: ${got.error}`);
      assert.equal(
        got.text,
        ANSWERS[want.answer],
        `request ${i}: whole answer of ${want.answer}`,
      );
      assert.equal(request.outcome, "success");
    } else {
      assert.ok(got.error, `request ${i} must fail, not pass as an answer`);
      assert.equal(request.outcome, "error");
      assert.equal(request.errorCode, want.error);
      if (want.read !== undefined) assert.equal(got.text, tokens("p", want.read).join(""));
      if (want.client) {
        assert.ok(got.error instanceof OpenAI.APIError, String(got.error));
        assert.deepEqual([got.error.status, got.error.code], [
          want.client.status,
          want.client.code,
        ]);
      }
    }
    assert.deepEqual(
      attempts.map((a) => [a.upstream, a.outcome, a.errorCode]),
      want.hops,
      `request ${i}: history rows`,
    );
  }
  if (s.calls?.p !== undefined) assert.equal(p.calls.length, s.calls.p, "calls to the primary");
  if (s.calls?.f !== undefined) assert.equal(f.calls.length, s.calls.f, "calls to the fallback");
  if (s.callsAt?.p) assert.deepEqual(at.p, s.callsAt.p, "when the primary was called");
  if (s.callsAt?.f) assert.deepEqual(at.f, s.callsAt.f, "when the fallback was called");
  if (s.primaryPausedMs !== undefined) {
    const { pausedUntil } = v.gw.cooldowns.get("p/primary");
    assert.equal(pausedUntil, firstCallAt + s.primaryPausedMs, "the primary's pause");
  }
}

/** The three rules every scenario keeps, whatever it comes to. */
function assertHonest(got: { text: string; error: unknown }, at: { request: number }): void {
  const where = `request ${at.request}`;
  // Not spliced: what the client read is one upstream's answer, or the start of it.
  assert.ok(
    ANSWERS.p.startsWith(got.text) || ANSWERS.f.startsWith(got.text),
    `${where}: text mixes upstreams: ${got.text.slice(0, 80)}`,
  );
  // Not truncated: a stream that ended without error carries a whole answer.
  if (got.error === null) {
    assert.ok(got.text === ANSWERS.p || got.text === ANSWERS.f, `${where}: truncated success`);
  }
  const message = got.error instanceof Error ? got.error.message : String(got.error ?? "");
  assert.doesNotMatch(message, /prefill/i, `${where}: a prefill error reached the client`);
}

for (const [n, s] of SCENARIOS.entries()) {
  Deno.test(`scorecard ${n + 1}/${SCENARIOS.length}: ${s.name}`, () => runScenario(s, n));
}

Deno.test("the scorecard's scenarios are the rows docs/liveness.md gives for it, in order", async () => {
  const doc = await Deno.readTextFile(new URL("../../docs/liveness.md", import.meta.url));
  const section = doc.slice(doc.indexOf("## The fault-injection scorecard"));
  const rows = section.split("\n").filter((line) => line.startsWith("| ")).slice(2)
    .map((line) => line.split("|")[1]!.trim());
  const told = SCENARIOS.map((s) => s.doc).filter((row, i, all) => all[i - 1] !== row);
  assert.deepEqual(told, rows);
});
