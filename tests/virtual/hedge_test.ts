/**
 * Hedged start (docs/liveness.md): a candidate silent for `hedge_after_secs`
 * gets the next one started beside it; the first to send content answers and
 * the other is cancelled at once, recorded `hedge_lost`, never penalised.
 * Upstreams speak the client's format, so the client's bytes can be compared
 * with the winner's byte for byte; the official SDKs check the text. A whole
 * gateway in virtual time (tests/virtual_gateway.ts) at the real defaults
 * (opening hold 15 s, idle timeout 300 s): each hedge starts at its delay
 * exactly, and the test acts at instants it names.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import { type ConfigInput, ConfigSchema } from "../../gateway/config/schema.ts";
import { OPENING_HOLD_MS } from "../../gateway/forward/stream_forward.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import type { FakeUpstream, Script } from "../fake_upstreams/server.ts";
import {
  chatStreamBlocks,
  chatWholeBody,
  openAiErrorBody,
} from "../fake_upstreams/openai_chat_script.ts";
import {
  responsesStreamChunks,
  responsesWholeBody,
} from "../fake_upstreams/openai_responses_script.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import * as geminiFake from "../fake_upstreams/gemini_script.ts";

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
 * The gateway's own keep-alive comments, sent once the opening hold (15 s) is over, before any
 * content: only a test whose winner answers after the hold has any.
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

/** The routes' hedge delay: B starts at exactly this many ms when A is silent. */
const HEDGE_MS = 1_000;

function hedgeConfig(
  kind: Kind,
  urls: string[],
  opts: { maxHedges?: number; slotWaitSecs?: number } = {},
): ConfigInput {
  const ids = urls.map((_, i) => String.fromCharCode(97 + i)); // a, b, c
  return {
    failover: { retries_per_candidate: 0, slot_wait_secs: opts.slotWaitSecs ?? 30 },
    upstreams: urls.map((url, i) => ({ id: ids[i]!, kind, base_url: url, max_in_flight: 1 })),
    routes: [{
      model: "smart",
      hedge_after_secs: HEDGE_MS / 1000,
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

/** The answer's text through the client format's official SDK (on the gateway's `fetch`). */
async function sdkText(
  v: VirtualGateway,
  opts: { kind: Kind; stream: boolean; id: string },
): Promise<string> {
  const headers = { "x-request-id": opts.id };
  const { kind, stream } = opts;
  if (kind === "openai-chat" || kind === "openai-responses") {
    const client = new OpenAI({
      baseURL: `${v.url}/v1`,
      apiKey: "unused",
      maxRetries: 0,
      fetch: v.fetch,
    });
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
    const client = new Anthropic({
      baseURL: v.url,
      apiKey: "unused",
      maxRetries: 0,
      fetch: v.fetch,
    });
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
    httpOptions: { baseUrl: v.url, apiVersion: "v1beta", fetch: v.fetch },
  });
  const request = { model: "smart", contents: "hi", config: { httpOptions: { headers } } };
  const chunks = stream
    ? await Array.fromAsync(await ai.models.generateContentStream(request))
    : [await ai.models.generateContent(request)];
  return chunks.map((c) => c.text ?? "").join("");
}

/** How the gateway left the call, or "open" if it has not within `ms` of virtual time. */
async function closedWithin(
  v: VirtualGateway,
  opts: { up: FakeUpstream; ms: number },
): Promise<string> {
  const call = opts.up.calls[0];
  if (!call) return "never called";
  let cancel = () => {};
  const late = new Promise<string>((r) => (cancel = v.clock.after(opts.ms, () => r("open"))));
  try {
    return await Promise.race([call.closed, late]);
  } finally {
    cancel();
  }
}

/** Virtual time passes (inside `v.run`) until `check` holds, a millisecond at a time. */
async function until(v: VirtualGateway, check: () => boolean): Promise<void> {
  while (!check()) await v.clock.sleep(1);
}

/** An admin API call with the admin token, through the gateway's handler. */
function adminFetch(v: VirtualGateway, path: string, init: RequestInit = {}): Promise<Response> {
  return v.fetch(`${v.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN}` },
  });
}

const ADMIN = "admin-secret";

/**
 * Runs `body` in virtual time with `n` in-process upstreams and a whole gateway over them;
 * every gate opens at the end.
 */
async function withRace(
  opts: { n: number; config: (urls: string[]) => ConfigInput; gates?: number },
  body: (
    ctx: { v: VirtualGateway; ups: FakeUpstream[]; gates: ReturnType<typeof gate>[] },
  ) => Promise<void>,
): Promise<void> {
  const gates = Array.from({ length: opts.gates ?? opts.n }, gate);
  await using v = await startVirtualGateway({
    upstreams: opts.n,
    config: opts.config,
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
  try {
    await v.run(body({ v, ups: v.ups, gates }));
  } finally {
    for (const g of gates) g.open();
  }
}

async function assertHedgeLost(
  v: VirtualGateway,
  opts: { id: string; loser: string; winner: string },
) {
  const { request, attempts } = await v.rowIn(opts.id);
  assert.equal(request.outcome, "success");
  assert.equal(request.upstream, opts.winner, "the request row names the winner");
  const by = (up: string) => attempts.find((a) => a.upstream === up);
  assert.equal(by(opts.loser)?.outcome, "hedge_lost");
  assert.equal(by(opts.loser)?.errorCode, "gw.upstream.hedge_lost");
  assert.equal(by(opts.winner)?.outcome, "success");
  const cool = v.gw.cooldowns.get(opts.loser);
  assert.equal(cool.consecutiveFailures, 0, "losing a hedge is not a failure");
  assert.equal(cool.pausedUntil, null);
  return { request, attempts };
}

/** Virtual ms from the request's start to each hop's, in hop order. */
function hopStarts(
  { request, attempts }: Awaited<ReturnType<VirtualGateway["row"]>>,
): number[] {
  return attempts.map((a) => a.startedAt - request.startedAt);
}

for (const kind of KINDS) {
  for (const stream of [true, false]) {
    const shape = stream ? "streamed" : "whole";
    Deno.test(`${kind} ${shape}: a silent first candidate is hedged at 1 s; the client gets B's answer only`, async () => {
      await withRace(
        { n: 2, config: (urls) => hedgeConfig(kind, urls) },
        async ({ v, ups, gates }) => {
          const [a, b] = ups as [FakeUpstream, FakeUpstream];
          a.enqueue(script(kind, { text: "from A, late", stream, gate: gates[0]!.promise }));
          b.enqueue(script(kind, { text: "from B", stream }));
          const id = `hedge-sdk-${kind}-${shape}`;
          const text = await sdkText(v, { kind, stream, id });
          assert.equal(text, "from B");
          assert.equal(
            await closedWithin(v, { up: a, ms: 0 }),
            "cancelled",
            "A's connection is closed at once",
          );
          const { request, attempts } = await assertHedgeLost(v, { id, loser: "a", winner: "b" });
          assert.deepEqual(hopStarts({ request, attempts }), [0, HEDGE_MS], "B started at 1 s");
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

    Deno.test(`${kind} ${shape}: the client's bytes are exactly B's, at 1 s`, async () => {
      await withRace(
        { n: 2, config: (urls) => hedgeConfig(kind, urls) },
        async ({ v, ups, gates }) => {
          const [a, b] = ups as [FakeUpstream, FakeUpstream];
          a.enqueue(script(kind, { text: "from A, late", stream, gate: gates[0]!.promise }));
          b.enqueue(script(kind, { text: "from B", stream }));
          const { path, body } = rawRequest(kind, stream);
          const res = await v.exchange(path, body);
          assert.equal(res.status, 200);
          const want = answer(kind, "from B");
          // B answered at 1 s, before the opening hold: not one keep-alive of the gateway's.
          assert.equal(res.text, stream ? want.chunks.join("") : want.whole);
          assert.equal(res.headersAt, HEDGE_MS);
          assert.equal(res.endedAt, HEDGE_MS);
          assert.equal(await closedWithin(v, { up: a, ms: 0 }), "cancelled");
          await assertHedgeLost(v, {
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
    { n: 2, config: (urls) => hedgeConfig("openai-chat", urls) },
    async ({ v, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      // B, the last candidate, sends keep-alives after the opening hold has answered the client:
      // not one of its bytes may reach the client while A can still win.
      const [role, ...rest] = answer("openai-chat", "from B").chunks;
      b.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [{ send: role! }, { wait: 20_000 }, { send: ": ping\n\n" }, {
          until: gates[1]!.promise,
        }]
          .concat(rest.map((send) => ({ send }))),
      });
      const { path, body } = rawRequest("openai-chat", true);
      const pending = v.exchange(path, body);
      // A's content comes at 50 s, past the hold (15 s) and B's ping (21 s).
      await v.clock.sleep(50_000);
      assert.equal(b.calls.length, 1);
      gates[0]!.open();
      const res = await pending;
      assert.equal(res.status, 200);
      assert.equal(res.headersAt, OPENING_HOLD_MS, "the opening hold answered the headers");
      assert.deepEqual(
        res.pieces.filter((p) => p.text === ": keep-alive\n\n").map((p) => p.at),
        [15_000, 30_000, 45_000],
        "the gateway's own keep-alives, every 15 s",
      );
      assert.equal(withoutHoldComments(res.text), answer("openai-chat", "from A").chunks.join(""));
      assert.equal(res.endedAt, 50_000);
      assert.equal(await closedWithin(v, { up: b, ms: 0 }), "cancelled");
      await assertHedgeLost(v, { id: res.headers.get("x-request-id")!, loser: "b", winner: "a" });
    },
  );
});

Deno.test("both hedged hops hold a slot while they run", async () => {
  const config = (urls: string[]) => hedgeConfig("openai-chat", urls, { slotWaitSecs: 0 });
  await withRace({ n: 2, config }, async ({ v, ups, gates }) => {
    const [a, b] = ups as [FakeUpstream, FakeUpstream];
    a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
    b.enqueue(script("openai-chat", { text: "from B", stream: true, gate: gates[1]!.promise }));
    const { path, body } = rawRequest("openai-chat", true);
    const pending = v.exchange(path, body);
    await until(v, () => b.calls.length === 1);
    const inFlight = async () => {
      const res = await adminFetch(v, "/admin/api/health");
      const view = await res.json() as { upstreams: { id: string; inFlight: number }[] };
      return Object.fromEntries(view.upstreams.map((u) => [u.id, u.inFlight]));
    };
    assert.deepEqual(await inFlight(), { a: 1, b: 1 });
    // With max_in_flight 1 each, a second request finds every candidate full.
    const second = await v.exchange(path, body);
    assert.equal(second.status, 429);
    gates[1]!.open();
    const res = await pending;
    assert.equal(
      withoutHoldComments(res.text),
      answer("openai-chat", "from B").chunks.join(""),
    );
    await assertHedgeLost(v, { id: res.headers.get("x-request-id")!, loser: "a", winner: "b" });
    await v.clock.sleep(0);
    assert.deepEqual(await inFlight(), { a: 0, b: 0 });
  });
});

Deno.test("max_hedges 2: three candidates run side by side, each hedge 1 s after the last; the third answers", async () => {
  const config = (urls: string[]) => hedgeConfig("anthropic", urls, { maxHedges: 2 });
  await withRace({ n: 3, config }, async ({ v, ups, gates }) => {
    const [a, b, c] = ups as [FakeUpstream, FakeUpstream, FakeUpstream];
    a.enqueue(script("anthropic", { text: "from A", stream: true, gate: gates[0]!.promise }));
    b.enqueue(script("anthropic", { text: "from B", stream: true, gate: gates[1]!.promise }));
    c.enqueue(script("anthropic", { text: "from C", stream: true }));
    const text = await sdkText(v, { kind: "anthropic", stream: true, id: "hedge-three" });
    assert.equal(text, "from C");
    assert.equal(await closedWithin(v, { up: a, ms: 0 }), "cancelled");
    assert.equal(await closedWithin(v, { up: b, ms: 0 }), "cancelled");
    const row = await v.rowIn("hedge-three");
    const { request, attempts } = row;
    assert.equal(request.upstream, "c");
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
      ["a", "hedge_lost"],
      ["b", "hedge_lost"],
      ["c", "success"],
    ]);
    assert.deepEqual(hopStarts(row), [0, HEDGE_MS, 2 * HEDGE_MS]);
    for (const up of ["a", "b"]) assert.equal(v.gw.cooldowns.get(up).consecutiveFailures, 0);
  });
});

Deno.test("max_hedges 1: a third candidate waits while the first two are silent", async () => {
  await withRace(
    { n: 3, config: (urls) => hedgeConfig("openai-chat", urls) },
    async ({ v, ups, gates }) => {
      const [a, b, c] = ups as [FakeUpstream, FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      b.enqueue(script("openai-chat", { text: "from B", stream: true, gate: gates[1]!.promise }));
      const { path, body } = rawRequest("openai-chat", true);
      const pending = v.exchange(path, body);
      // A minute, sixty hedge delays: a second hedge would have started long before.
      await v.clock.sleep(60_000);
      assert.equal(b.calls.length, 1);
      assert.equal(c.calls.length, 0);
      gates[1]!.open();
      const res = await pending;
      const text = withoutHoldComments(res.text);
      assert.equal(text, answer("openai-chat", "from B").chunks.join(""));
      assert.equal(res.endedAt, 60_000);
      assert.equal(c.calls.length, 0);
    },
  );
});

Deno.test("a hedged hop that fails before content leaves the other running", async () => {
  await withRace(
    { n: 2, config: (urls) => hedgeConfig("openai-chat", urls) },
    async ({ v, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
      b.enqueue({
        status: 500,
        body: [{ send: '{"error":{"message":"boom","type":"server_error"}}' }],
      });
      const { path, body } = rawRequest("openai-chat", true);
      const pending = v.exchange(path, body);
      await until(v, () => b.calls.length === 1);
      assert.equal(await b.calls[0]!.closed, "ended");
      assert.equal(await closedWithin(v, { up: a, ms: 10_000 }), "open", "A keeps running");
      gates[0]!.open();
      const res = await pending;
      assert.equal(
        withoutHoldComments(res.text),
        answer("openai-chat", "from A").chunks.join(""),
      );
      const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [["a", "success"], [
        "b",
        "error",
      ]]);
      assert.equal(v.gw.cooldowns.get("b").consecutiveFailures, 1, "B's 500 is still B's failure");
    },
  );
});

Deno.test("an abort stops every hedged hop; none is recorded as lost", async () => {
  await withRace(
    { n: 2, config: (urls) => hedgeConfig("openai-chat", urls) },
    async ({ v, ups, gates }) => {
      const [a, b] = ups as [FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: false, gate: gates[0]!.promise }));
      b.enqueue(script("openai-chat", { text: "from B", stream: false, gate: gates[1]!.promise }));
      const { path, body } = rawRequest("openai-chat", false);
      const sentAt = v.clock.sinceStart;
      const pending = v.exchange(path, body, { headers: { "x-request-id": "hedge-abort" } });
      await until(v, () => b.calls.length === 1);
      const abortAt = v.clock.sinceStart - sentAt;
      const abort = await adminFetch(v, "/request/hedge-abort/abort", { method: "POST" });
      assert.deepEqual((await abort.json()).requests, ["hedge-abort"]);
      const res = await pending;
      assert.equal(res.status, 400, "a Chat client is told the abort as a final 400");
      assert.equal(res.endedAt, abortAt, "at once");
      assert.equal(await closedWithin(v, { up: a, ms: 0 }), "cancelled");
      assert.equal(await closedWithin(v, { up: b, ms: 0 }), "cancelled");
      const { request, attempts } = await v.rowIn("hedge-abort");
      assert.equal(request.errorCode, "gw.request.aborted");
      assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [
        ["a", "aborted"],
        ["b", "aborted"],
      ]);
    },
  );
});

Deno.test("a candidate's own hedge_after_secs hedges it on a route that does not", async () => {
  const config = (urls: string[]) => {
    const c = hedgeConfig("gemini", urls);
    const route = c.routes[0]!;
    delete route.hedge_after_secs;
    const first = route.candidates[0]!;
    if ("upstream" in first) first.hedge_after_secs = 2;
    return c;
  };
  await withRace({ n: 2, config }, async ({ v, ups, gates }) => {
    const [a, b] = ups as [FakeUpstream, FakeUpstream];
    a.enqueue(script("gemini", { text: "from A", stream: false, gate: gates[0]!.promise }));
    b.enqueue(script("gemini", { text: "from B", stream: false }));
    const text = await sdkText(v, { kind: "gemini", stream: false, id: "hedge-override" });
    assert.equal(text, "from B");
    const row = await assertHedgeLost(v, { id: "hedge-override", loser: "a", winner: "b" });
    assert.deepEqual(hopStarts(row), [0, 2_000], "the candidate's own 2 s");
  });
});

Deno.test("a caller's error from the hedge ends the request; the silent hop is cancelled", async () => {
  // B's refusal at 100 ms comes long before the opening hold's 15 s: a status, not an event.
  const config = (urls: string[]) => {
    const c = hedgeConfig("openai-chat", urls);
    c.routes[0]!.hedge_after_secs = 0.1;
    return c;
  };
  await withRace({ n: 2, config }, async ({ v, ups, gates }) => {
    const [a, b] = ups as [FakeUpstream, FakeUpstream];
    a.enqueue(script("openai-chat", { text: "from A", stream: true, gate: gates[0]!.promise }));
    const refusal = openAiErrorBody({ message: "bad field", type: "invalid_request_error" });
    b.enqueue({ status: 400, body: [{ send: refusal }] });
    const { path, body } = rawRequest("openai-chat", true);
    const res = await v.exchange(path, body);
    assert.equal(res.status, 400);
    assert.equal(res.text, refusal, "B's own error, as it came");
    assert.equal(res.endedAt, 100);
    assert.equal(await closedWithin(v, { up: a, ms: 0 }), "cancelled");
    const row = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(row.attempts.map((x) => [x.upstream, x.outcome]), [
      ["a", "hedge_lost"],
      ["b", "error"],
    ]);
    assert.deepEqual(hopStarts(row), [0, 100]);
    assert.equal(v.gw.cooldowns.get("a").consecutiveFailures, 0);
    assert.equal(v.gw.cooldowns.get("b").consecutiveFailures, 0, "the caller's error is not B's");
  });
});

Deno.test("a lost hop's billed tokens stay on its own attempt, not on the request", async () => {
  // A (anthropic) tells its prompt's bill in message_start, then goes silent; B (chat) answers
  // without any usage. The request's row must not carry A's tokens as if they were the answer's.
  const config = (urls: string[]): ConfigInput => ({
    failover: { retries_per_candidate: 0 },
    upstreams: [
      { id: "a", kind: "anthropic", base_url: urls[0]! },
      { id: "b", kind: "openai-chat", base_url: urls[1]! },
    ],
    routes: [{
      model: "smart",
      hedge_after_secs: 1,
      candidates: [{ upstream: "a", model: "claude" }, { upstream: "b", model: "gpt" }],
    }],
  });
  await withRace({ n: 2, config }, async ({ v, ups, gates }) => {
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
    const res = await v.exchange(path, body);
    assert.equal(res.text, chatStreamBlocks({ text: ["from B"] }).join(""));
    const { request, attempts } = await assertHedgeLost(v, {
      id: res.headers.get("x-request-id")!,
      loser: "a",
      winner: "b",
    });
    assert.equal(attempts.find((x) => x.upstream === "a")?.inputTokens, 99);
    // B reported no usage: the request carries B's estimate (docs/observability.md), never A's 99.
    assert.equal(request.tokensEstimated, true);
    assert.notEqual(request.inputTokens, 99, "the answer's own tokens only");
    const metrics = await (await v.fetch(`${v.url}/metrics`)).text();
    assert.match(metrics, /pulsegate_tokens_total\{upstream="a",direction="input"\} 99/);
    assert.match(metrics, /pulsegate_attempts_total\{upstream="a",outcome="hedge_lost"\} 1/);
  });
});

Deno.test("a whole answer that breaks after winning fails over to the next candidate", async () => {
  // The race point of a whole answer is its first byte: B wins it, A is cancelled; B then breaks
  // off before its body is complete (nothing reached the client), so C is tried, plainly.
  await withRace(
    { n: 3, config: (urls) => hedgeConfig("openai-chat", urls) },
    async ({ v, ups, gates }) => {
      const [a, b, c] = ups as [FakeUpstream, FakeUpstream, FakeUpstream];
      a.enqueue(script("openai-chat", { text: "from A", stream: false, gate: gates[0]!.promise }));
      b.enqueue({ body: [{ send: "{" }, { wait: 50 }, { reset: true }] });
      c.enqueue(script("openai-chat", { text: "from C", stream: false }));
      const { path, body } = rawRequest("openai-chat", false);
      const res = await v.exchange(path, body);
      assert.equal(res.status, 200);
      assert.equal(res.text, answer("openai-chat", "from C").whole);
      const row = await v.rowIn(res.headers.get("x-request-id")!);
      assert.equal(row.request.upstream, "c");
      assert.deepEqual(row.attempts.map((x) => [x.upstream, x.outcome]), [
        ["a", "hedge_lost"],
        ["b", "error"],
        ["c", "success"],
      ]);
      // C is tried the moment B breaks off, 50 ms after its first byte.
      assert.deepEqual(hopStarts(row), [0, HEDGE_MS, HEDGE_MS + 50]);
      assert.equal(res.endedAt, HEDGE_MS + 50);
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
