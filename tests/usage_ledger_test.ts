/**
 * The usage ledger (docs/observability.md "Token usage"): every attempt row carries what its
 * upstream billed. Reported usage is recorded as is; when content flowed but the usage never came
 * (cut, stall, abort, client gone, hedge lost) the tokens are estimated and flagged. Chat streams
 * always ask their upstream for usage; a Chat client that did not ask gets no usage-only chunk.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { estimateTokens } from "../gateway/formats/token_estimate.ts";
import { eventually, postJson, type TestGateway, withGateway } from "./harness.ts";
import * as anthropic from "./fake_upstreams/anthropic_script.ts";
import * as gemini from "./fake_upstreams/gemini_script.ts";
import { bedrockStreamChunks } from "./fake_upstreams/bedrock_script.ts";
import { chatStreamBlocks } from "./fake_upstreams/openai_chat_script.ts";
import { responsesStreamChunks } from "./fake_upstreams/openai_responses_script.ts";
import { RESUME_ENV, upstreamEntry } from "./fake_upstreams/resume_scripts.ts";
import type { FakeUpstream, Script, Step } from "./fake_upstreams/server.ts";

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

function config(kind: Kind, url: string, idleSecs: number): ConfigInput {
  return {
    failover: { idle_timeout_secs: idleSecs },
    upstreams: [upstreamEntry(kind, { id: "up", url })],
    routes: [{ model: "smart", candidates: [{ upstream: "up", model: "m" }] }],
  };
}

/** Reads the client's stream until `text` has arrived; answers what was read. */
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  text: string,
): Promise<string> {
  const decoder = new TextDecoder();
  let got = "";
  while (!got.includes(text)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended before ${JSON.stringify(text)}: ${got}`);
    got += decoder.decode(value, { stream: true });
  }
  return got;
}

async function runPath(
  gw: TestGateway,
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
  const res = await postJson(`${gw.url}/v1/chat/completions`, {
    model: "smart",
    stream: true,
    messages,
  }, { "x-request-id": id });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  // Chat chunks escape nothing in these words, so the delivered text shows in the bytes.
  await readUntil(reader, JSON.stringify(CUT_AFTER).slice(1, -1));
  if (path === "abort") {
    const control = await fetch(`${gw.url}/request/${id}/abort`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(control.status, 200);
  }
  if (path === "disconnect") await reader.cancel();
  else while (!(await reader.read()).done) { /* drain to the end */ }
}

for (const kind of KINDS) {
  for (const path of PATHS) {
    Deno.test(`usage ledger: ${kind} upstream, ${path}`, async () => {
      await withGateway(async (gw, [up]) => {
        const id = `ledger-${kind}-${path}`;
        await runPath(gw, { up: up!, kind, path, id });
        const { request, attempts } = await gw.row(id);
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
        config: ([url]) => config(kind, url!, path === "stall" ? 30 : 300),
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
      await withGateway(async (gw, [up]) => {
        up!.enqueue(script(kind));
        const res = await postJson(`${gw.url}/v1/chat/completions`, {
          model: "smart",
          stream: true,
          messages,
          ...(asked ? { stream_options: { include_usage: true } } : {}),
        });
        const text = await res.text();
        if (kind === "openai-chat") {
          const sent = up!.calls[0]!.json as { stream_options?: { include_usage?: boolean } };
          assert.equal(sent.stream_options?.include_usage, true, "usage asked of the upstream");
          const blocks = chatStreamBlocks({ text: TEXT, usage: USAGE });
          const expected = asked ? blocks : blocks.filter((b) => !b.includes('"choices":[]'));
          assert.equal(text, expected.join(""), "byte for byte, less the usage-only chunk");
        }
        assert.equal(chunksOf(text).filter(usageOnly).length, asked ? 1 : 0);
        const { request, attempts } = await gw.row(res.headers.get("x-request-id")!);
        assert.equal(attempts[0]!.outputTokens, USAGE.output);
        assert.equal(attempts[0]!.tokensEstimated, false);
        assert.equal(request.outputTokens, USAGE.output);
        assert.equal(request.inputTokens, USAGE.input);
      }, { config: ([url]) => config(kind, url!, 300) });
    });
  }
}

Deno.test("usage ledger: a hedge's loser keeps what it reported; the winner's usage is the request's", async () => {
  await withGateway(async (gw, [a, b]) => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const aChunks = anthropic.streamChunks({ text: ["late"], usage: { input: 99, output: 5 } });
    // message_start (A's bill for the prompt) and a ping, then nothing until the test ends.
    a!.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: [{ send: aChunks[0]! }, { until: gate }, ...aChunks.slice(1).map((send) => ({ send }))],
    });
    b!.enqueue(script("anthropic"));
    const res = await postJson(`${gw.url}/v1/chat/completions`, {
      model: "smart",
      stream: true,
      messages,
    });
    const text = await res.text();
    release();
    assert.match(text, /"content":"you\?"/);
    const { request, attempts } = await gw.row(res.headers.get("x-request-id")!);
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
    await eventually(() => a!.openConnections === 0, { what: "A closed", ms: 2000 });
  }, {
    upstreams: 2,
    config: ([ua, ub]) => ({
      failover: { idle_timeout_secs: 300 },
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
  await withGateway(async (gw, [up]) => {
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
      const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).choices[0].message.content, text);
      const { request, attempts } = await gw.row(res.headers.get("x-request-id")!);
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
    const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages });
    assert.notEqual(res.status, 200);
    await res.body?.cancel();
    const { attempts } = await gw.row(res.headers.get("x-request-id")!);
    assert.equal(attempts[0]!.tokensEstimated, false);
    assert.equal(attempts[0]!.outputTokens, null);
  }, { config: ([url]) => config("openai-chat", url!, 300) });
});
