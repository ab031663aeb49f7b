/**
 * The usage ledger (docs/observability.md "Token usage"): every attempt row carries what its
 * upstream billed. Reported usage is recorded as is; when content flowed but the usage never came
 * (cut, stall, abort, client gone, hedge lost) the tokens are estimated and flagged. Chat streams
 * always ask their upstream for usage; a Chat client that did not ask gets no usage-only chunk.
 * A whole gateway in virtual time (tests/virtual_gateway.ts) at the real defaults: a stall is
 * given up on at 300 s exactly, an abort and a client leaving end the answer at the instant.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { estimateTokens } from "../../gateway/formats/token_estimate.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import * as anthropic from "../fake_upstreams/anthropic_script.ts";
import * as gemini from "../fake_upstreams/gemini_script.ts";
import { bedrockStreamChunks } from "../fake_upstreams/bedrock_script.ts";
import { chatStreamBlocks } from "../fake_upstreams/openai_chat_script.ts";
import { responsesStreamChunks } from "../fake_upstreams/openai_responses_script.ts";
import { RESUME_ENV, upstreamEntry } from "../fake_upstreams/resume_scripts.ts";
import type { FakeUpstream, Script, Step } from "../fake_upstreams/server.ts";

type Kind = "openai-chat" | "openai-responses" | "anthropic" | "gemini" | "bedrock";
const KINDS: Kind[] = ["openai-chat", "openai-responses", "anthropic", "gemini", "bedrock"];
type StopPath = "finish" | "cut" | "stall" | "abort" | "disconnect";
const PATHS: StopPath[] = ["finish", "cut", "stall", "abort", "disconnect"];

const ADMIN = "admin-secret";
const USAGE = { input: 11, output: 7 };
const TEXT = ["Hello, ", "world, ", "how are ", "you?"];
/** The last piece a stopped answer delivers: the fake stops right after the chunk carrying it. */
const CUT_AFTER = "how are ";
const DELIVERED = TEXT.slice(0, TEXT.indexOf(CUT_AFTER) + 1).join("");
/** Kinds that report the prompt's tokens before any text (Anthropic's message_start, Gemini's every chunk). */
const INPUT_FIRST: Kind[] = ["anthropic", "gemini"];
const messages = [{ role: "user", content: "Say hello, please" }];

function chunks(kind: Kind): (string | Uint8Array)[] {
  const script = { text: TEXT, usage: USAGE };
  switch (kind) {
    case "openai-chat":
      return chatStreamBlocks(script);
    case "openai-responses":
      return responsesStreamChunks(script);
    case "anthropic":
      return anthropic.streamChunks(script);
    case "gemini":
      return gemini.streamChunks(script);
    case "bedrock":
      return bedrockStreamChunks(script);
  }
}

const latin1 = new TextDecoder("latin1");

/** The whole answer with its usage, or its first chunks through CUT_AFTER and then `fault`. */
function script(kind: Kind, fault?: Step): Script {
  const all = chunks(kind);
  const texts = all.map((c) => typeof c === "string" ? c : latin1.decode(c));
  const cut = texts.findIndex((t) => t.includes(CUT_AFTER));
  const body = fault ? [...all.slice(0, cut + 1).map((send) => ({ send })), fault] : all.map((
    send,
  ) => ({ send }));
  const headers = kind === "bedrock"
    ? { "content-type": "application/vnd.amazon.eventstream" }
    : { "content-type": "text/event-stream" };
  return { headers, body };
}

/** The default idle timeout; a stopped answer is stopped at STOP_AT, long before it. */
const IDLE_MS = 300_000;
const STOP_AT = 10_000;

/** A whole gateway in virtual time over `upstreams` in-process fakes; `run` runs in it. */
async function withGateway(
  run: (v: VirtualGateway, ups: FakeUpstream[]) => Promise<void>,
  opts: {
    upstreams?: number;
    config: (urls: string[]) => ConfigInput;
    env?: Record<string, string>;
  },
): Promise<void> {
  await using v = await startVirtualGateway({ ...opts, cryptoHoldsTime: true });
  await v.run(run(v, v.ups));
}

function config(kind: Kind, url: string): ConfigInput {
  return {
    upstreams: [upstreamEntry(kind, { id: "up", url })],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
  };
}

async function runPath(
  v: VirtualGateway,
  opts: { up: FakeUpstream; kind: Kind; path: StopPath; id: string },
): Promise<void> {
  const { up, kind, path, id } = opts;
  const fault: Record<StopPath, Step | undefined> = {
    finish: undefined,
    cut: { reset: true },
    stall: { hang: true },
    abort: { hang: true },
    disconnect: { hang: true },
  };
  up.enqueue(script(kind, fault[path]));
  const pending = v.exchange("/v1/chat/completions", { model: "smart", stream: true, messages }, {
    headers: { "x-request-id": id },
    leaveAfterMs: path === "disconnect" ? STOP_AT : undefined,
  });
  if (path === "abort") {
    await v.clock.sleep(STOP_AT);
    const control = await v.fetch(`${v.url}/request/${id}/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(control.status, 200);
  }
  const res = await pending;
  assert.equal(res.status, 200);
  // Chat chunks escape nothing in these words, so the delivered text shows in the bytes, at once.
  const delivered = JSON.stringify(CUT_AFTER).slice(1, -1);
  assert.equal(res.pieces.find((p) => p.text.includes(delivered))?.at, 0);
  const endedAt = { finish: 0, cut: 0, stall: IDLE_MS, abort: STOP_AT, disconnect: STOP_AT };
  assert.equal(res.endedAt, endedAt[path]);
}

for (const kind of KINDS) {
  for (const path of PATHS) {
    Deno.test(`usage ledger: ${kind} upstream, ${path}`, async () => {
      await withGateway(async (v, [up]) => {
        const id = `ledger-${kind}-${path}`;
        await runPath(v, { up: up!, kind, path, id });
        const { request, attempts } = await v.rowIn(id);
        assert.equal(attempts.length, 1);
        const attempt = attempts[0]!;
        if (path === "finish") {
          assert.equal(attempt.inputTokens, USAGE.input);
          assert.equal(attempt.outputTokens, USAGE.output);
          assert.equal(attempt.tokensEstimated, false);
          assert.equal(request.inputTokens, USAGE.input);
          assert.equal(request.outputTokens, USAGE.output);
          assert.equal(request.tokensEstimated, false);
          return;
        }
        assert.equal(attempt.tokensEstimated, true, "no usage came after the text: estimated");
        assert.ok((attempt.outputTokens ?? 0) >= estimateTokens(DELIVERED), "output estimated");
        assert.ok((attempt.outputTokens ?? 0) < USAGE.output + estimateTokens(TEXT.join("")));
        if (INPUT_FIRST.includes(kind)) {
          assert.equal(attempt.inputTokens, USAGE.input, "the reported prompt count is kept");
        } else {
          assert.ok((attempt.inputTokens ?? 0) > 0, "input estimated from the request");
        }
        assert.equal(request.tokensEstimated, true, "the request delivered content: never 0");
        assert.equal(request.outputTokens, attempt.outputTokens);
        assert.equal(request.inputTokens, attempt.inputTokens);
      }, {
        config: ([url]) => config(kind, url!),
        env: { ...RESUME_ENV, PULSEGATE_ADMIN_TOKEN: ADMIN },
      });
    });
  }
}

/** The client's SSE data payloads, parsed. */
function chunksOf(text: string): unknown[] {
  return text.split("\n\n").filter((b) => b.startsWith("data: ") && !b.includes("[DONE]"))
    .map((b) => JSON.parse(b.slice(6)));
}

const usageOnly = (c: unknown) =>
  typeof c === "object" && c !== null && Array.isArray((c as { choices?: unknown }).choices) &&
  (c as { choices: unknown[] }).choices.length === 0 && "usage" in c;

for (const kind of ["openai-chat", "anthropic"] as const) {
  for (const asked of [false, true]) {
    const how = asked ? "asked for usage" : "did not ask for usage";
    Deno.test(`usage ledger: a Chat client that ${how}, ${kind} upstream`, async () => {
      await withGateway(async (v, [up]) => {
        up!.enqueue(script(kind));
        const res = await v.exchange("/v1/chat/completions", {
          model: "smart",
          stream: true,
          messages,
          ...(asked ? { stream_options: { include_usage: true } } : {}),
        });
        const text = res.text;
        if (kind === "openai-chat") {
          const sent = up!.calls[0]!.json as { stream_options?: { include_usage?: boolean } };
          assert.equal(sent.stream_options?.include_usage, true, "usage asked of the upstream");
          const blocks = chatStreamBlocks({ text: TEXT, usage: USAGE });
          const expected = asked ? blocks : blocks.filter((b) => !b.includes('"choices":[]'));
          assert.equal(text, expected.join(""), "byte for byte, less the usage-only chunk");
        }
        assert.equal(chunksOf(text).filter(usageOnly).length, asked ? 1 : 0);
        const { request, attempts } = await v.rowIn(res.headers.get("x-request-id")!);
        assert.equal(attempts[0]!.outputTokens, USAGE.output);
        assert.equal(attempts[0]!.tokensEstimated, false);
        assert.equal(request.outputTokens, USAGE.output);
        assert.equal(request.inputTokens, USAGE.input);
      }, { config: ([url]) => config(kind, url!) });
    });
  }
}

Deno.test("usage ledger: a hedge's loser keeps what it reported; the winner's usage is the request's", async () => {
  await withGateway(async (v, [a, b]) => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const aChunks = anthropic.streamChunks({ text: ["late"], usage: { input: 99, output: 5 } });
    // message_start (A's bill for the prompt) and a ping, then nothing until the test ends.
    a!.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: [{ send: aChunks[0]! }, { until: gate }, ...aChunks.slice(1).map((send) => ({ send }))],
    });
    b!.enqueue(script("anthropic"));
    const res = await v.exchange("/v1/chat/completions", {
      model: "smart",
      stream: true,
      messages,
    });
    const text = res.text;
    release();
    assert.equal(res.endedAt, 1_000, "B, the hedge at 1 s, answered at once");
    assert.match(text, /"content":"you\?"/);
    const { request, attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    const loser = attempts.find((x) => x.upstream === "a")!;
    const winner = attempts.find((x) => x.upstream === "b")!;
    assert.equal(loser.outcome, "hedge_lost");
    assert.equal(loser.inputTokens, 99, "what it reported before the cancel");
    // Cancelled at the winner's first content, before any of its own: nothing to estimate.
    assert.equal(loser.tokensEstimated, false);
    assert.equal(winner.outputTokens, USAGE.output);
    assert.equal(winner.tokensEstimated, false);
    assert.equal(request.outputTokens, USAGE.output);
    assert.equal(request.inputTokens, USAGE.input);
    assert.equal(await a!.calls[0]!.closed, "cancelled");
    assert.equal(a!.openConnections, 0, "A closed");
  }, {
    upstreams: 2,
    config: ([ua, ub]) => ({
      upstreams: [
        { id: "a", kind: "anthropic", base_url: ua! },
        { id: "b", kind: "anthropic", base_url: ub! },
      ],
      routes: [{
        model: "smart",
        hedge_after_secs: 1,
        candidates: [{ upstream: "a", model: "m" }, { upstream: "b", model: "m" }],
      }],
    }),
  });
});

Deno.test("usage ledger: a whole answer's reported usage is kept; one without usage is estimated", async () => {
  await withGateway(async (v, [up]) => {
    const text = TEXT.join("");
    const whole = (usage?: typeof USAGE) =>
      JSON.stringify({
        id: "chatcmpl-fake",
        object: "chat.completion",
        created: 1700000000,
        model: "fake-model",
        choices: [{
          index: 0,
          message: { role: "assistant", content: text },
          finish_reason: "stop",
        }],
        ...(usage
          ? {
            usage: {
              prompt_tokens: usage.input,
              completion_tokens: usage.output,
              total_tokens: usage.input + usage.output,
            },
          }
          : {}),
      });
    for (const usage of [USAGE, undefined]) {
      up!.enqueue({ body: [{ send: whole(usage) }] });
      const res = await v.exchange("/v1/chat/completions", { model: "smart", messages });
      assert.equal(res.status, 200);
      assert.equal(JSON.parse(res.text).choices[0].message.content, text);
      const { request, attempts } = await v.rowIn(res.headers.get("x-request-id")!);
      const expected = usage
        ? { input: USAGE.input, output: USAGE.output, estimated: false }
        : { input: attempts[0]!.inputTokens, output: estimateTokens(text), estimated: true };
      for (const row of [attempts[0]!, request]) {
        assert.equal(row.outputTokens, expected.output);
        assert.equal(row.inputTokens, expected.input);
        assert.equal(row.tokensEstimated, expected.estimated);
      }
      if (!usage) assert.ok((attempts[0]!.inputTokens ?? 0) > 0, "input estimated");
    }
    // Whitespace is no content: a hop that sent only that billed nothing to estimate.
    up!.enqueue({ body: [{ send: "   \n\n  " }] });
    const res = await v.exchange("/v1/chat/completions", { model: "smart", messages });
    assert.notEqual(res.status, 200);
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.tokensEstimated, false);
    assert.equal(attempts[0]!.outputTokens, null);
  }, { config: ([url]) => config("openai-chat", url!) });
});
