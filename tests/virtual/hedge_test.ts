/**
 * Hedged start (docs/liveness.md): a candidate silent for `hedge_after_secs`
 * gets the next one started beside it; the first to send content answers and
 * the other is cancelled at once, recorded `hedge_lost`, never penalised.
 * Upstreams speak the client's format, so the client's bytes can be compared
 * with the winner's byte for byte; the official SDKs check the text.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { type ConfigInput, ConfigSchema } from "../gateway/config/schema.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { ADMIN, adminFetch } from "./admin_helpers.ts";
import { type FakeUpstream, type Script, startFakeUpstream } from "./fake_upstreams/server.ts";
import {
  chatStreamBlocks,
  chatWholeBody,
  openAiErrorBody,
} from "./fake_upstreams/openai_chat_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "./fake_upstreams/openai_responses_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import * as geminiFake from "./fake_upstreams/gemini_script.ts";

type Kind = "openai-chat" | "openai-responses" | "anthropic" | "gemini";
const KINDS: Kind[] = ["openai-chat", "openai-responses", "anthropic", "gemini"];
const USAGE = { input: 11, output: 3 };

/** An answer in a kind's wire format: the stream's chunks (keep-alives first) or the whole body. */
function answer(kind: Kind, text: string): { chunks: string[]; keepAlives: number; whole: string } {
  const script = { text: [text], usage: USAGE };
  const str = (chunks: (string | Uint8Array)[]) => chunks.map((c) => c as string);
  switch (kind) {
    case "openai-chat":
      return { chunks: chatStreamBlocks(script), keepAlives: 1, whole: chatWholeBody(script) };
    case "openai-responses":
      return {
        chunks: str(responsesStreamChunks(script)),
        keepAlives: 2,
        whole: responsesWholeBody(script),
      };
    case "anthropic":
      return {
        chunks: str(anthropicFake.streamChunks(script)),
        keepAlives: anthropicFake.keepAliveCount(script),
        whole: anthropicFake.wholeBody(script),
      };
    case "gemini": {
      const g = { ...script, pingFirst: 1 };
      return {
        chunks: str(geminiFake.streamChunks(g)),
        keepAlives: geminiFake.keepAliveCount(g),
        whole: geminiFake.wholeBody(g),
      };
    }
  }
}

/** A held answer: keep-alives only (streamed) or nothing (whole) until `gate` settles. */
function script(
  kind: Kind,
  opts: { text: string; stream: boolean; gate?: Promise<unknown> },
): Script {
  const a = answer(kind, opts.text);
  const gate = opts.gate ? [{ until: opts.gate }] : [];
  if (!opts.stream) {
    return { headers: { "content-type": "application/json" }, body: [...gate, { send: a.whole }] };
  }
  const send = (chunks: string[]) => chunks.map((c) => ({ send: c }));
  return {
    headers: { "content-type": "text/event-stream" },
    body: [
      ...send(a.chunks.slice(0, a.keepAlives)),
      ...gate,
      ...send(a.chunks.slice(a.keepAlives)),
    ],
  };
}

/**
 * The gateway's own keep-alive comments, sent once the opening hold is over, before any content:
 * at the test scale the hold is 150 ms, which a loaded machine may pass before the winner answers.
 */
function withoutHoldComments(text: string): string {
  return text.replace(/^(: keep-alive\n\n)+/, "");
}

/** A promise the test settles when it wants: an upstream's content, held back. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

function hedgeConfig(
  kind: Kind,
  ups: FakeUpstream[],
  opts: { maxHedges?: number; slotWaitSecs?: number } = {},
): ConfigInput {
  const ids = ups.map((_, i) => String.fromCharCode(97 + i)); // a, b, c
  return {
    // A silence only the hedge can end: the idle timeout (36 s here) never fires in a test.
    failover: {
      idle_timeout_secs: 3600,
      retries_per_candidate: 0,
      slot_wait_secs: opts.slotWaitSecs ?? 30,
    },
    upstreams: ups.map((up, i) => ({ id: ids[i]!, kind, base_url: up.url, max_in_flight: 1 })),
    routes: [{
      model: "smart",
      hedge_after_secs: 1, // 10 ms at the test scale
      max_hedges: opts.maxHedges,
      candidates: ids.map((id) => ({ upstream: id, model: `model-${id}` })),
    }],
  };
}

/** Each client format's request, raw: the path and body, streamed or whole. */
function rawRequest(kind: Kind, stream: boolean): { path: string; body: unknown } {
  const messages = [{ role: "user", content: "hi" }];
  switch (kind) {
    case "openai-chat": {
      // Asking for usage, so the client's bytes are the upstream's, usage chunk and all.
      const usage = stream ? { stream_options: { include_usage: true } } : {};
      return { path: "/v1/chat/completions", body: { model: "smart", messages, stream, ...usage } };
    }
    case "openai-responses":
      return { path: "/v1/responses", body: { model: "smart", input: "hi", stream } };
    case "anthropic":
      return { path: "/v1/messages", body: { model: "smart", max_tokens: 50, messages, stream } };
    case "gemini":
      return {
        path: stream
          ? "/v1beta/models/smart:streamGenerateContent?alt=sse"
          : "/v1beta/models/smart:generateContent",
        body: { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
      };
  }
}

/** The answer's text through the client format's official SDK, sent with our request id. */
async function sdkText(
  gw: TestGateway,
  opts: { kind: Kind; stream: boolean; id: string },
): Promise<string> {
  const headers = { "x-request-id": opts.id };
  const { kind, stream } = opts;
  if (kind === "openai-chat" || kind === "openai-responses") {
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 });
    if (kind === "openai-responses") {
      const body = { model: "smart", input: "hi" };
      const res = stream
        ? await client.responses.stream(body, { headers }).finalResponse()
        : await client.responses.create(body, { headers });
      return res.output_text;
    }
    const messages = [{ role: "user" as const, content: "hi" }];
    if (!stream) {
      const res = await client.chat.completions.create({ model: "smart", messages }, { headers });
      return res.choices[0]?.message.content ?? "";
    }
    const chunks = await client.chat.completions.create(
      { model: "smart", messages, stream: true },
      { headers },
    );
    let text = "";
    for await (const c of chunks) text += c.choices[0]?.delta.content ?? "";
    return text;
  }
  if (kind === "anthropic") {
    const client = new Anthropic({ baseURL: gw.url, apiKey: "unused", maxRetries: 0 });
    const body = {
      model: "smart",
      max_tokens: 50,
      messages: [{ role: "user" as const, content: "hi" }],
    };
    const msg = stream
      ? await client.messages.stream(body, { headers }).finalMessage()
      : await client.messages.create(body, { headers });
    return msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
  }
  const ai = new GoogleGenAI({
    apiKey: "unused",
    httpOptions: { baseUrl: gw.url, apiVersion: "v1beta" },
  });
  const request = { model: "smart", contents: "hi", config: { httpOptions: { headers } } };
  const chunks = stream
    ? await Array.fromAsync(await ai.models.generateContentStream(request))
    : [await ai.models.generateContent(request)];
  return chunks.map((c) => c.text ?? "").join("");
}

/** Resolves how the gateway left the call, or "open" if it has not within `ms`. */
function closedWithin(up: FakeUpstream, ms: number): Promise<string> {
  const call = up.calls[0];
  if (!call) return Promise.resolve("never called");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<string>((r) => (timer = setTimeout(() => r("open"), ms)));
  return Promise.race([call.closed, late]).finally(() => clearTimeout(timer));
}

/** Runs `body` with `n` fake upstreams and a gateway over them; every gate opens at the end. */
async function withRace(
  opts: {
    n: number;
    config: (ups: FakeUpstream[]) => ConfigInput;
    gates?: number;
    /** The gateway's time scale; TEST_SCALE unless a test needs its timers further apart. */
    scale?: number;
  },
  body: (
    ctx: { gw: TestGateway; ups: FakeUpstream[]; gates: ReturnType<typeof gate>[] },
  ) => Promise<void>,
): Promise<void> {
  const ups = Array.from({ length: opts.n }, () => startFakeUpstream());
  const gates = Array.from({ length: opts.gates ?? opts.n }, gate);
  const gw = await startTestGateway(opts.config(ups), {
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
    scale: opts.scale,
  });
  try {
    await body({ gw, ups, gates });
  } finally {
    for (const g of gates) g.open();
    await gw.stop();
    await Promise.all(ups.map((u) => u.close()));
  }
}

async function assertHedgeLost(
  gw: TestGateway,
  opts: { id: string; loser: string; winner: string },
) {
  const { request, attempts } = await gw.row(opts.id);
  assert.equal(request.outcome, "success");
  assert.equal(request.upstream, opts.winner, "the request row names the winner");
  const by = (up: string) => attempts.find((a) => a.upstream === up);
  assert.equal(by(opts.loser)?.outcome, "hedge_lost");
  assert.equal(by(opts.loser)?.errorCode, "gw.upstream.hedge_lost");
  assert.equal(by(opts.winner)?.outcome, "success");
  const cool = gw.cooldowns.get(opts.loser);
  assert.equal(cool.consecutiveFailures, 0, "losing a hedge is not a failure");
  assert.equal(cool.pausedUntil, null);
  return { request, attempts };
}

for (const kind of KINDS) {
  for (const stream of [true, false]) {
    const shape = stream ? "streamed" : "whole";
    Deno.test(`${kind} ${shape}: a silent first candidate is hedged; the client gets B's answer only`, async () => {
      await withRace(
        { n: 2, config: (ups) => hedgeConfig(kind, ups) },
        async ({ gw, ups, gates }) => {
          const [a, b] = ups as [FakeUpstream, FakeUpstream];
          a.enqueue(script(kind, { text: "from A, late", stream, gate: gates[0]!.promise }));
          b.enqueue(script(kind, { text: "from B", stream }));
          const id = `hedge-sdk-${kind}-${shape}`;
          const text = await sdkText(gw, { kind, stream, id });
          assert.equal(text, "from B");
          assert.equal(
            await closedWithin(a, 5000),
            "cancelled",
            "A's connection is closed at once",
          );
          const { attempts } = await assertHedgeLost(gw, { id, loser: "a", winner: "b" });
          const lost = attempts.find((x) => x.upstream === "a")!;
          if (kind === "anthropic" && stream) {
            // message_start, a keep-alive, told A's bill for the prompt before it was cancelled.
            assert.equal(lost.inputTokens, USAGE.input);
          } else if (lost.headersMs !== null) {
            // A answered with headers, so it read the prompt: its input is billed (reported, as
            // Gemini does in its chunks, or else estimated).
            assert.ok((lost.inputTokens ?? 0) > 0, `${kind}: the loser's input is billed`);
          }
        },
      );
    });

    Deno.test(`${kind} ${shape}: the client's bytes are exactly B's`, async () => {
      await withRace(
        { n: 2, config: (ups) => hedgeConfig(kind, ups) },
        async ({ gw, ups, gates }) => {
          const [a, b] = ups as [FakeUpstream, FakeUpstream];
          a.enqueue(script(kind, { text: "from A, late", stream, gate: gates[0]!.promise }));
          b.enqueue(script(kind, { text: "from B", stream }));
          const { path, body } = rawRequest(kind, stream);
          const res = await postJson(`${gw.url}${path}`, body);
          assert.equal(res.status, 200);
          const want = answer(kind, "from B");
          assert.equal(
            withoutHoldComments(await res.text()),
            stream ? want.chunks.join("") : want.whole,
          );
          assert.equal(await closedWithin(a, 5000), "cancelled");
          await assertHedgeLost(gw, {
            id: res.headers.get("x-request-id")!,
            loser: "a",
            winner: "b",
          });
        },
      );
    });
  }
}

Deno.test("the first candidate wins when its content comes first: the hedge is cancelled", async () => {
  await withRace(
    { n: 2, config: (ups) => hedgeConfig("openai-chat", ups) },
    async ({ gw, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      // B, the last candidate, sends keep-alives after the opening hold has answered the client:
      // not one of its bytes may reach the client while A can still win.
      const [role, ...rest] = answer("openai-chat", "from B").chunks;
      b.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [{ send: role! }, { wait: 300 }, { send: ": ping\n\n" }, { until: gates[1]!.promise }]
          .concat(rest.map((send) => ({ send }))),
      });
      const { path, body } = rawRequest("openai-chat", true);
      const res = await postJson(`${gw.url}${path}`, body);
      assert.equal(res.status, 200, "the opening hold (150 ms here) answered the headers");
      await eventually(() => b.calls.length === 1);
      await new Promise((r) => setTimeout(r, 600));
      gates[0]!.open();
      const text = await res.text();
      assert.equal(withoutHoldComments(text), answer("openai-chat", "from A").chunks.join(""));
      assert.equal(await closedWithin(b, 5000), "cancelled");
      await assertHedgeLost(gw, { id: res.headers.get("x-request-id")!, loser: "b", winner: "a" });
    },
  );
});

Deno.test("both hedged hops hold a slot while they run", async () => {
  const config = (ups: FakeUpstream[]) => hedgeConfig("openai-chat", ups, { slotWaitSecs: 0 });
  await withRace({ n: 2, config }, async ({ gw, ups, gates }) => {
    const [a, b] = ups as [FakeUpstream, FakeUpstream];
    a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
    b.enqueue(script("openai-chat", { text: "from B", stream: true, gate: gates[1]!.promise }));
    const { path, body } = rawRequest("openai-chat", true);
    const pending = postJson(`${gw.url}${path}`, body);
    await eventually(() => b.calls.length === 1);
    const inFlight = async () => {
      const res = await adminFetch(gw, "/admin/api/health");
      const view = await res.json() as { upstreams: { id: string; inFlight: number }[] };
      return Object.fromEntries(view.upstreams.map((u) => [u.id, u.inFlight]));
    };
    assert.deepEqual(await inFlight(), { a: 1, b: 1 });
    // With max_in_flight 1 each, a second request finds every candidate full.
    const second = await postJson(`${gw.url}${path}`, body);
    assert.equal(second.status, 429);
    await second.body?.cancel();
    gates[1]!.open();
    const res = await pending;
    assert.equal(
      withoutHoldComments(await res.text()),
      answer("openai-chat", "from B").chunks.join(""),
    );
    await assertHedgeLost(gw, { id: res.headers.get("x-request-id")!, loser: "a", winner: "b" });
    await eventually(async () => JSON.stringify(await inFlight()) === '{"a":0,"b":0}');
  });
});

Deno.test("max_hedges 2: three candidates run side by side, the third answers", async () => {
  const config = (ups: FakeUpstream[]) => hedgeConfig("anthropic", ups, { maxHedges: 2 });
  await withRace({ n: 3, config }, async ({ gw, ups, gates }) => {
    const [a, b, c] = ups as [FakeUpstream, FakeUpstream, FakeUpstream];
    a.enqueue(script("anthropic", { text: "from A", stream: true, gate: gates[0]!.promise }));
    b.enqueue(script("anthropic", { text: "from B", stream: true, gate: gates[1]!.promise }));
    c.enqueue(script("anthropic", { text: "from C", stream: true }));
    const text = await sdkText(gw, { kind: "anthropic", stream: true, id: "hedge-three" });
    assert.equal(text, "from C");
    assert.equal(await closedWithin(a, 5000), "cancelled");
    assert.equal(await closedWithin(b, 5000), "cancelled");
    const { request, attempts } = await gw.row("hedge-three");
    assert.equal(request.upstream, "c");
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
      ["a", "hedge_lost"],
      ["b", "hedge_lost"],
      ["c", "success"],
    ]);
    for (const up of ["a", "b"]) assert.equal(gw.cooldowns.get(up).consecutiveFailures, 0);
  });
});

Deno.test("max_hedges 1: a third candidate waits while the first two are silent", async () => {
  await withRace(
    { n: 3, config: (ups) => hedgeConfig("openai-chat", ups) },
    async ({ gw, ups, gates }) => {
      const [a, b, c] = ups as [FakeUpstream, FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      b.enqueue(script("openai-chat", { text: "from B", stream: true, gate: gates[1]!.promise }));
      const { path, body } = rawRequest("openai-chat", true);
      const pending = postJson(`${gw.url}${path}`, body);
      await eventually(() => b.calls.length === 1);
      // Twenty hedge delays: a second hedge would have started long before.
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(c.calls.length, 0);
      gates[1]!.open();
      const res = await pending;
      const text = withoutHoldComments(await res.text());
      assert.equal(text, answer("openai-chat", "from B").chunks.join(""));
      assert.equal(c.calls.length, 0);
    },
  );
});

Deno.test("a hedged hop that fails before content leaves the other running", async () => {
  await withRace(
    { n: 2, config: (ups) => hedgeConfig("openai-chat", ups) },
    async ({ gw, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      b.enqueue({
        status: 500,
        body: [{ send: '{"error":{"message":"boom","type":"server_error"}}' }],
      });
      const { path, body } = rawRequest("openai-chat", true);
      const pending = postJson(`${gw.url}${path}`, body);
      await eventually(() => b.calls.length === 1);
      assert.equal(await b.calls[0]!.closed, "ended");
      assert.equal(await closedWithin(a, 50), "open", "A keeps running");
      gates[0]!.open();
      const res = await pending;
      assert.equal(
        withoutHoldComments(await res.text()),
        answer("openai-chat", "from A").chunks.join(""),
      );
      const { attempts } = await gw.row(res.headers.get("x-request-id")!);
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [["a", "success"], [
        "b",
        "error",
      ]]);
      assert.equal(gw.cooldowns.get("b").consecutiveFailures, 1, "B's 500 is still B's failure");
    },
  );
});

Deno.test("an abort stops every hedged hop; none is recorded as lost", async () => {
  await withRace(
    { n: 2, config: (ups) => hedgeConfig("openai-chat", ups) },
    async ({ gw, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: false, gate: gates[0]!.promise }));
      b.enqueue(script("openai-chat", { text: "from B", stream: false, gate: gates[1]!.promise }));
      const { path, body } = rawRequest("openai-chat", false);
      const pending = postJson(`${gw.url}${path}`, body, { "x-request-id": "hedge-abort" });
      await eventually(() => b.calls.length === 1);
      const abort = await adminFetch(gw, "/request/hedge-abort/abort", { method: "POST" });
      assert.deepEqual((await abort.json()).requests, ["hedge-abort"]);
      const res = await pending;
      assert.equal(res.status, 400, "a Chat client is told the abort as a final 400");
      await res.body?.cancel();
      assert.equal(await closedWithin(a, 5000), "cancelled");
      assert.equal(await closedWithin(b, 5000), "cancelled");
      const { request, attempts } = await gw.row("hedge-abort");
      assert.equal(request.errorCode, "gw.request.aborted");
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
        ["a", "aborted"],
        ["b", "aborted"],
      ]);
    },
  );
});

Deno.test("a candidate's own hedge_after_secs hedges it on a route that does not", async () => {
  const config = (ups: FakeUpstream[]) => {
    const c = hedgeConfig("gemini", ups);
    const route = c.routes[0]!;
    delete route.hedge_after_secs;
    const first = route.candidates[0]!;
    if ("upstream" in first) first.hedge_after_secs = 1;
    return c;
  };
  await withRace({ n: 2, config }, async ({ gw, ups, gates }) => {
    const [a, b] = ups as [FakeUpstream, FakeUpstream];
    a.enqueue(script("gemini", { text: "from A", stream: false, gate: gates[0]!.promise }));
    b.enqueue(script("gemini", { text: "from B", stream: false }));
    const text = await sdkText(gw, { kind: "gemini", stream: false, id: "hedge-override" });
    assert.equal(text, "from B");
    await assertHedgeLost(gw, { id: "hedge-override", loser: "a", winner: "b" });
  });
});

Deno.test("a caller's error from the hedge ends the request; the silent hop is cancelled", async () => {
  // B's refusal must beat the opening hold, or it goes in the stream after a 200: at the test
  // scale the hold was 150 ms, which a loaded machine missed. Here it is 3 s, the hedge 20 ms.
  const config = (ups: FakeUpstream[]) => {
    const c = hedgeConfig("openai-chat", ups);
    c.routes[0]!.hedge_after_secs = 0.1;
    return c;
  };
  await withRace(
    { n: 2, config, scale: 0.2 },
    async ({ gw, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      const refusal = openAiErrorBody({ message: "bad field", type: "invalid_request_error" });
      b.enqueue({ status: 400, body: [{ send: refusal }] });
      const { path, body } = rawRequest("openai-chat", true);
      const res = await postJson(`${gw.url}${path}`, body);
      assert.equal(res.status, 400);
      assert.equal(await res.text(), refusal, "B's own error, as it came");
      assert.equal(await closedWithin(a, 5000), "cancelled");
      const { attempts } = await gw.row(res.headers.get("x-request-id")!);
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
        ["a", "hedge_lost"],
        ["b", "error"],
      ]);
      assert.equal(gw.cooldowns.get("a").consecutiveFailures, 0);
      assert.equal(gw.cooldowns.get("b").consecutiveFailures, 0, "the caller's error is not B's");
    },
  );
});

Deno.test("a lost hop's billed tokens stay on its own attempt, not on the request", async () => {
  // A (anthropic) tells its prompt's bill in message_start, then goes silent; B (chat) answers
  // without any usage. The request's row must not carry A's tokens as if they were the answer's.
  const config = (ups: FakeUpstream[]): ConfigInput => ({
    failover: { idle_timeout_secs: 3600, retries_per_candidate: 0 },
    upstreams: [
      { id: "a", kind: "anthropic", base_url: ups[0]!.url },
      { id: "b", kind: "openai-chat", base_url: ups[1]!.url },
    ],
    routes: [{
      model: "smart",
      hedge_after_secs: 1,
      candidates: [{ upstream: "a", model: "claude" }, { upstream: "b", model: "gpt" }],
    }],
  });
  await withRace({ n: 2, config }, async ({ gw, ups, gates }) => {
    const [a, b] = ups as [FakeUpstream, FakeUpstream];
    const billed = { text: ["late"], usage: { input: 99, output: 0 } };
    const aChunks = anthropicFake.streamChunks(billed).map((send) => ({ send }));
    a.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: [aChunks[0]!, { until: gates[0]!.promise }, ...aChunks.slice(1)],
    });
    b.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: chatStreamBlocks({ text: ["from B"] }).map((send) => ({ send })),
    });
    const { path, body } = rawRequest("openai-chat", true);
    const res = await postJson(`${gw.url}${path}`, body);
    assert.equal(
      withoutHoldComments(await res.text()),
      chatStreamBlocks({ text: ["from B"] }).join(""),
    );
    const { request, attempts } = await assertHedgeLost(gw, {
      id: res.headers.get("x-request-id")!,
      loser: "a",
      winner: "b",
    });
    assert.equal(attempts.find((x) => x.upstream === "a")?.inputTokens, 99);
    // B reported no usage: the request carries B's estimate (docs/observability.md), never A's 99.
    assert.equal(request.tokensEstimated, true);
    assert.notEqual(request.inputTokens, 99, "the answer's own tokens only");
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(metrics, /pulsegate_tokens_total\{upstream="a",direction="input"\} 99/);
    assert.match(metrics, /pulsegate_attempts_total\{upstream="a",outcome="hedge_lost"\} 1/);
  });
});

Deno.test("a whole answer that breaks after winning fails over to the next candidate", async () => {
  // The race point of a whole answer is its first byte: B wins it, A is cancelled; B then breaks
  // off before its body is complete (nothing reached the client), so C is tried, plainly.
  await withRace(
    { n: 3, config: (ups) => hedgeConfig("openai-chat", ups) },
    async ({ gw, ups, gates }) => {
      const [a, b, c] = ups as [FakeUpstream, FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: false, gate: gates[0]!.promise }));
      b.enqueue({ body: [{ send: "{" }, { wait: 50 }, { reset: true }] });
      c.enqueue(script("openai-chat", { text: "from C", stream: false }));
      const { path, body } = rawRequest("openai-chat", false);
      const res = await postJson(`${gw.url}${path}`, body);
      assert.equal(res.status, 200);
      assert.equal(await res.text(), answer("openai-chat", "from C").whole);
      const { request, attempts } = await gw.row(res.headers.get("x-request-id")!);
      assert.equal(request.upstream, "c");
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
        ["a", "hedge_lost"],
        ["b", "error"],
        ["c", "success"],
      ]);
    },
  );
});

Deno.test("hedge settings are validated: 0.1 to 3600 seconds, 1 to 3 hedges", () => {
  const route = (extra: Record<string, unknown>, candidate: Record<string, unknown> = {}) => ({
    upstreams: [{ id: "a", kind: "openai-chat", base_url: "http://127.0.0.1:9" }],
    routes: [{ model: "m", candidates: [{ upstream: "a", model: "x", ...candidate }], ...extra }],
  });
  const ok = (input: unknown) => ConfigSchema.safeParse(input).success;
  assert.ok(ok(route({})), "off by default");
  assert.equal(ConfigSchema.parse(route({})).routes[0]!.hedge_after_secs, undefined);
  assert.equal(ConfigSchema.parse(route({})).routes[0]!.max_hedges, 1);
  assert.ok(ok(route({ hedge_after_secs: 0.1, max_hedges: 3 })));
  assert.ok(ok(route({}, { hedge_after_secs: 3600, max_hedges: 2 })));
  assert.ok(!ok(route({ hedge_after_secs: 0.05 })));
  assert.ok(!ok(route({ hedge_after_secs: 3601 })));
  assert.ok(!ok(route({ max_hedges: 0 })));
  assert.ok(!ok(route({}, { max_hedges: 4 })));
  assert.ok(!ok(route({ max_hedges: 1.5 })));
});
