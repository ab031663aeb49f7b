/**
 * Resuming a stream that broke after content (docs/liveness.md "Mid-stream resume"), through
 * every client format's official SDK, on a whole gateway in virtual time (tests/virtual_gateway.ts)
 * at the real defaults: a stalled first answer is given up on at its 300 s of silence exactly,
 * and the continuation starts at that instant.
 */
import assert from "node:assert/strict";
import { estimateTokens } from "../../gateway/formats/token_estimate.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import type { FakeUpstream, Script } from "../fake_upstreams/server.ts";
import * as anthropicFake from "../fake_upstreams/anthropic_script.ts";
import { responsesStreamChunks } from "../fake_upstreams/openai_responses_script.ts";
import {
  type Fault,
  type PrefillKind,
  RESUME_ENV,
  RESUME_SCRIPTS,
  SECOND_USAGE,
  upstreamEntry,
} from "../fake_upstreams/resume_scripts.ts";
import { type ClientFormat, type ClientRead, CLIENTS } from "../resume_clients.ts";
import { type ConfigInput, ConfigSchema } from "../../gateway/config/schema.ts";
import { routeMembers } from "../../gateway/config/route_entries.ts";

/** What the client already had when the first answer broke: "Hello, wor". */
const OFFSET = 10;

/** The first hop's row, per fault: outcome and code. */
const FIRST_ROW: Record<Fault, { outcome: string; code?: string }> = {
  reset: { outcome: "error", code: "gw.upstream.error" },
  stall: { outcome: "idle_timeout", code: "gw.upstream.idle_timeout_mid_stream" },
  error: { outcome: "error" },
};

/** The default idle timeout (docs/liveness.md): a stalled answer is given up on at it. */
const IDLE_MS = 300_000;

interface Upstreams {
  kind: PrefillKind;
  /** The first upstream's kind, when it differs. */
  firstKind?: PrefillKind | "openai-responses";
  /** Whether each upstream (in route order) takes a prefill. */
  prefill: boolean[];
  /** The route's `resume_after_content` ("prefill" unless said). */
  mode?: "prefill" | "replay" | "auto";
}

/** One route over `urls`, its upstreams `${prefix}up1`...; `model` "smart" unless said. */
function resumeConfig(
  urls: string[],
  opts: Upstreams & { resume?: boolean; prefix?: string; model?: string },
): ConfigInput {
  const id = (i: number) => `${opts.prefix ?? ""}up${i + 1}`;
  return {
    upstreams: urls.map((url, i) =>
      upstreamEntry(i === 0 ? opts.firstKind ?? opts.kind : opts.kind, { id: id(i), url })
    ),
    routes: [{
      model: opts.model ?? "smart",
      resume_after_content: opts.resume === false ? null : opts.mode ?? "prefill",
      candidates: urls.map((_, i) => ({
        upstream: id(i),
        model: `model-${i + 1}`,
        accepts_prefill: opts.prefill[i] ?? false,
      })),
    }],
  };
}

/** `count` in-process upstreams behind a resume route, with the admin token, in virtual time. */
async function withResumeRoute(
  count: number,
  opts: Upstreams & { resume?: boolean },
  run: (v: VirtualGateway, ups: FakeUpstream[]) => Promise<void>,
): Promise<void> {
  await using v = await startVirtualGateway({
    upstreams: count,
    config: (urls) => resumeConfig(urls, opts),
    env: { ...RESUME_ENV, PULSEGATE_ADMIN_TOKEN: ADMIN },
    cryptoHoldsTime: true,
  });
  await run(v, v.ups);
}

const ADMIN = "admin-secret";
let seq = 0;
const requestId = () => `resume-${++seq}`;

/** Virtual ms from the request's start to each hop's, in hop order. */
function hopStarts(
  { request, attempts }: Awaited<ReturnType<VirtualGateway["row"]>>,
): number[] {
  return attempts.map((a) => a.startedAt - request.startedAt);
}

const FORMATS: ClientFormat[] = ["anthropic", "openai-chat", "openai-responses", "gemini"];
const KINDS: PrefillKind[] = ["anthropic", "openai-chat", "gemini", "bedrock"];
const FAULTS: Fault[] = ["reset", "stall", "error"];

/**
 * The client read one answer, "Hello, world!", without an error, in one content block: the
 * continuation went on in the block it continues.
 */
function assertOneAnswer(read: ClientRead): void {
  assert.equal(read.error, undefined);
  assert.equal(read.text, "Hello, world!");
  assert.equal(read.starts, 1);
  assert.equal(read.ends, 1);
  assert.deepEqual([...new Set(read.indexes)].length, 1, `indexes ${read.indexes}`);
}

interface ResumeCell {
  format: ClientFormat;
  kind: PrefillKind;
  fault: Fault;
}

const RESUME_CELLS: ResumeCell[] = FORMATS.flatMap((format) =>
  KINDS.flatMap((kind) => FAULTS.map((fault) => ({ format, kind, fault })))
);

/**
 * The cells share one gateway, each on a route and two upstreams of its own, all started at one
 * instant of its virtual clock; each is then told as a step of its own.
 */
Deno.test("a break after content resumes with a prefill: every client format, upstream kind and fault", async (t) => {
  await using v = await startVirtualGateway({
    upstreams: 2 * RESUME_CELLS.length,
    config: (urls) => {
      const routes = RESUME_CELLS.map(({ kind }, i) =>
        resumeConfig(urls.slice(2 * i, 2 * i + 2), {
          kind,
          prefill: [false, true],
          prefix: `c${i}-`,
          model: `c${i}`,
        })
      );
      return {
        upstreams: routes.flatMap((c) => c.upstreams),
        routes: routes.flatMap((c) => c.routes),
      };
    },
    env: RESUME_ENV,
    cryptoHoldsTime: true,
  });
  const failed = await v.run(
    Promise.all(
      RESUME_CELLS.map((cell, i) =>
        resumedCell(cell, { v, ups: v.ups.slice(2 * i, 2 * i + 2), model: `c${i}` })
          .then(() => null, (err: unknown) => err)
      ),
    ),
  );
  for (const [i, { format, kind, fault }] of RESUME_CELLS.entries()) {
    await t.step(
      `${format} client, ${kind} upstreams: ${fault} after content resumes with a prefill`,
      () => {
        if (failed[i]) throw failed[i];
      },
    );
  }
});

async function resumedCell(
  { format, kind, fault }: ResumeCell,
  opts: { v: VirtualGateway; ups: FakeUpstream[]; model: string },
): Promise<void> {
  const scripts = RESUME_SCRIPTS[kind];
  const { v, model } = opts;
  const [first, second] = opts.ups;
  first!.enqueue(scripts.first(fault));
  second!.enqueue(scripts.second());
  const id = requestId();
  const read = await CLIENTS[format](v.url, { requestId: id, fetch: v.fetch, model });
  assertOneAnswer(read);
  // The second upstream was asked to continue exactly what the client has.
  assert.equal(second!.calls.length, 1);
  assert.deepEqual(scripts.lastTurn(second!.calls[0]!), {
    role: "assistant",
    text: "Hello, wor",
  });
  const row = await v.rowIn(id);
  const { request, attempts } = row;
  assert.equal(request.outcome, "success");
  assert.equal(attempts.length, 2);
  // A stall is given up on at 300 s of silence exactly; a reset or an error event at once.
  assert.deepEqual(hopStarts(row), [0, fault === "stall" ? IDLE_MS : 0]);
  const [hop1, hop2] = attempts;
  assert.equal(hop1!.outcome, FIRST_ROW[fault].outcome);
  if (FIRST_ROW[fault].code) assert.equal(hop1!.errorCode, FIRST_ROW[fault].code);
  else assert.ok(hop1!.errorCode, "the in-stream error's code is on the first hop");
  assert.equal(hop1!.resumeOffset, null);
  assert.equal(hop2!.outcome, "resumed");
  assert.equal(hop2!.resumeOffset, OFFSET);
  // The first hop's usage never came after its text: its tokens are estimated, keeping
  // what it reported (docs/observability.md "Token usage").
  assert.equal(hop1!.tokensEstimated, true);
  assert.equal(hop2!.tokensEstimated, false);
  const reported = scripts.firstReported;
  if (reported.input !== undefined) assert.equal(hop1!.inputTokens, reported.input);
  else assert.ok((hop1!.inputTokens ?? 0) > 0);
  assert.ok(
    (hop1!.outputTokens ?? 0) >=
      Math.max(reported.output ?? 0, estimateTokens("Hello, wor")),
  );
  // Tokens are summed over the hops: on the row and in what the client read.
  const input = (hop1!.inputTokens ?? 0) + (hop2!.inputTokens ?? 0);
  const output = (hop1!.outputTokens ?? 0) + (hop2!.outputTokens ?? 0);
  assert.equal(hop2!.inputTokens, SECOND_USAGE.input);
  assert.equal(hop2!.outputTokens, SECOND_USAGE.output);
  assert.equal(request.tokensEstimated, true);
  assert.equal(request.inputTokens, input);
  assert.equal(request.outputTokens, output);
  assert.equal(read.usage.input, input);
  assert.equal(read.usage.output, output);
}

/** Anthropic client over anthropic upstreams: the cases where a resume must not happen, or not as asked. */
const anthropicScripts = RESUME_SCRIPTS.anthropic;
const refusesPrefill = (): Script => ({
  status: 400,
  headers: { "content-type": "application/json" },
  body: [{
    send: anthropicFake.errorBody(400, "This model does not support assistant message prefill."),
  }],
});

Deno.test("resume off: a break after content ends with the error event, the next candidate is never asked", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true], resume: false },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      second!.enqueue(anthropicScripts.second());
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.ok(read.error, "the SDK raised the stream's error event");
      assert.equal(second!.calls.length, 0);
      const { request, attempts } = await v.row(id);
      assert.equal(request.outcome, "error");
      assert.equal(request.errorCode, "gw.upstream.error");
      assert.equal(attempts.length, 1);
    },
  );
});

Deno.test("no candidate accepts a prefill: the original failure's error event, no other upstream asked", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [true, false] },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("stall"));
      second!.enqueue(anthropicScripts.second());
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.ok(read.error);
      assert.equal(second!.calls.length, 0);
      const { request, attempts } = await v.row(id);
      assert.equal(request.errorCode, "gw.upstream.idle_timeout_mid_stream");
      assert.deepEqual(attempts.map((a) => a.outcome), ["idle_timeout"]);
      assert.equal(attempts[0]!.durationMs, IDLE_MS, "given up on at 300 s");
    },
  );
});

Deno.test("a candidate that refuses the prefill is passed over for the next capable one", async () => {
  await withResumeRoute(3, { kind: "anthropic", prefill: [false, true, true] }, async (v, ups) => {
    const [first, refusing, third] = ups;
    first!.enqueue(anthropicScripts.first("reset"));
    refusing!.enqueue(refusesPrefill());
    third!.enqueue(anthropicScripts.second());
    const id = requestId();
    const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
    assert.equal(read.error, undefined);
    assert.equal(read.text, "Hello, world!");
    assert.equal(read.starts, 1);
    assert.equal(read.ends, 1);
    assert.deepEqual(anthropicScripts.lastTurn(refusing!.calls[0]!).text, "Hello, wor");
    const { request, attempts } = await v.row(id);
    assert.equal(request.outcome, "success");
    assert.deepEqual(
      attempts.map((a) => [a.outcome, a.status, a.resumeOffset]),
      [["error", 200, null], ["error", 400, OFFSET], ["resumed", 200, OFFSET]],
    );
  });
});

Deno.test("the only capable candidate refuses the prefill: the original failure's error event, never the 400", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true] },
    async (v, [first, refusing]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      refusing!.enqueue(refusesPrefill());
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.ok(read.error);
      assert.doesNotMatch(read.error, /prefill|invalid_request_error/);
      assert.match(read.error, /broke off its stream/);
      assert.equal(refusing!.calls.length, 1);
      const { request, attempts } = await v.row(id);
      assert.equal(request.errorCode, "gw.upstream.error");
      assert.equal(request.status, 502);
      assert.deepEqual(attempts.map((a) => a.status), [200, 400]);
    },
  );
});

Deno.test("a stream that delivered a tool call is never resumed", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true] },
    async (v, [first, second]) => {
      const chunks = anthropicFake.streamChunks({
        text: ["Hello, ", "wor"],
        toolCall: { id: "toolu_1", name: "lookup", argsPieces: ['{"q":', '"x"}'] },
        usage: { input: 5, output: 2 },
      });
      // Through the tool call's first argument piece: the call is in progress.
      first!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [...chunks.slice(0, 8).map((send) => ({ send })), { reset: true }],
      });
      second!.enqueue(anthropicScripts.second());
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.ok(read.error);
      assert.equal(second!.calls.length, 0);
      const { request, attempts } = await v.row(id);
      assert.equal(request.errorCode, "gw.upstream.error");
      assert.equal(attempts.length, 1);
    },
  );
});

Deno.test("a continuation that breaks too is resumed again, from the longer text", async () => {
  await withResumeRoute(3, { kind: "anthropic", prefill: [false, true, true] }, async (v, ups) => {
    const [first, second, third] = ups;
    first!.enqueue(anthropicScripts.first("reset"));
    // "ld" then a reset: the third upstream continues "Hello, world".
    second!.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: [
        ...anthropicFake.streamChunks({ text: ["ld"], usage: { input: 7, output: 1 } }).slice(0, 3)
          .map((send) => ({ send })),
        { reset: true },
      ],
    });
    third!.enqueue({
      headers: { "content-type": "text/event-stream" },
      body: anthropicFake.streamChunks({ text: ["!"], usage: { input: 9, output: 1 } })
        .map((send) => ({ send })),
    });
    const id = requestId();
    const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
    assert.equal(read.error, undefined);
    assert.equal(read.text, "Hello, world!");
    assert.equal(read.starts, 1);
    assert.equal(read.ends, 1);
    assert.equal(anthropicScripts.lastTurn(third!.calls[0]!).text, "Hello, world");
    const { attempts } = await v.row(id);
    assert.deepEqual(
      attempts.map((a) => [a.outcome, a.resumeOffset]),
      [["error", null], ["error", OFFSET], ["resumed", 12]],
    );
    // The admin history finds it as resumed, and its detail names where each resume began.
    const admin = { headers: { authorization: `Bearer ${ADMIN}` } };
    const page = await (await v.fetch(`${v.url}/admin/api/requests?outcome=resumed`, admin))
      .json();
    assert.deepEqual(page.requests.map((r: { id: string }) => r.id), [id]);
    assert.deepEqual(
      page.requests[0].hops.map((h: { outcome: string }) => h.outcome),
      ["error", "error", "resumed"],
    );
    const detail = await (await v.fetch(`${v.url}/admin/api/requests/${id}`, admin)).json();
    assert.deepEqual(
      detail.attempts.map((a: { resumeOffset: number | null }) => a.resumeOffset),
      [null, OFFSET, 12],
    );
    assert.equal(read.usage.input, 5 + 7 + 9);
  });
});

Deno.test("whitespace the client already has is not sent as prefill, nor repeated by the continuation", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true] },
    async (v, [first, second]) => {
      const chunks = anthropicFake.streamChunks({
        text: ["Hello,", " "],
        usage: { input: 5, output: 2 },
      });
      first!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [...chunks.slice(0, 4).map((send) => ({ send })), { reset: true }],
      });
      second!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: anthropicFake.streamChunks({ text: [" world!"], usage: { input: 7, output: 3 } })
          .map((send) => ({ send })),
      });
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.equal(read.text, "Hello, world!");
      // Anthropic refuses a final assistant turn that ends in whitespace.
      assert.equal(anthropicScripts.lastTurn(second!.calls[0]!).text, "Hello,");
      const { attempts } = await v.row(id);
      assert.equal(attempts[1]!.resumeOffset, 7);
    },
  );
});

Deno.test("with resume on, a Responses answer from a Responses upstream is encoded, so an anthropic upstream can continue it", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", firstKind: "openai-responses", prefill: [false, true] },
    async (v, [first, second]) => {
      // created, in_progress, item added, part added, "Hello, ", "wor": then the connection breaks.
      const chunks = responsesStreamChunks({
        text: ["Hello, ", "wor"],
        usage: { input: 5, output: 2 },
      });
      first!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [...chunks.slice(0, 6).map((send) => ({ send })), { reset: true }],
      });
      second!.enqueue(anthropicScripts.second());
      const id = requestId();
      const read = await v.run(
        CLIENTS["openai-responses"](v.url, { requestId: id, fetch: v.fetch }),
      );
      assert.equal(read.error, undefined);
      assert.equal(read.text, "Hello, world!");
      assert.equal(read.starts, 1);
      assert.equal(read.ends, 1);
      assert.deepEqual([...new Set(read.indexes)], ["0/0"]);
      assert.equal(anthropicScripts.lastTurn(second!.calls[0]!).text, "Hello, wor");
      const { attempts } = await v.row(id);
      assert.deepEqual(attempts.map((a) => a.outcome), ["error", "resumed"]);
    },
  );
});

Deno.test("a request with provider-run tools is never resumed", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true] },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      second!.enqueue(anthropicScripts.second());
      const id = requestId();
      const res = await v.send("/v1/messages", {
        model: "smart",
        max_tokens: 100,
        stream: true,
        messages: [{ role: "user", content: "Search, then say hello" }],
        tools: [{ type: "web_search_20250305", name: "web_search" }],
      }, { headers: { "x-request-id": id } });
      const body = res.text;
      assert.match(body, /event: error/);
      assert.equal(second!.calls.length, 0);
      const { request } = await v.row(id);
      assert.equal(request.errorCode, "gw.upstream.error");
    },
  );
});

Deno.test("config: resume is off by default, a Responses or Interactions upstream cannot be marked as taking a prefill, and replay or auto take any", () => {
  const base = resumeConfig(["http://127.0.0.1:1"], { kind: "anthropic", prefill: [true] });
  const defaults = ConfigSchema.parse({
    upstreams: base.upstreams,
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m" }] }],
  });
  assert.equal(defaults.routes[0]!.resume_after_content, null);
  assert.equal(routeMembers(defaults.routes[0]!)[0]!.accepts_prefill, false);
  const responses = ConfigSchema.safeParse({
    ...base,
    upstreams: [{ id: "up1", kind: "openai-responses", base_url: "http://127.0.0.1:1" }],
  });
  assert.equal(responses.success, false);
  assert.deepEqual(responses.error?.issues.map((i) => [i.path.join("."), i.message]), [[
    "routes.0.candidates.0.accepts_prefill",
    "an openai-responses upstream cannot continue a prefill",
  ]]);
  const interactions = ConfigSchema.safeParse({
    ...base,
    upstreams: [{ id: "up1", kind: "gemini-interactions", base_url: "http://127.0.0.1:1" }],
  });
  assert.deepEqual(interactions.error?.issues.map((i) => [i.path.join("."), i.message]), [[
    "routes.0.candidates.0.accepts_prefill",
    "a gemini-interactions upstream cannot continue a prefill",
  ]]);
  // Replay and auto take any candidate, a Responses one too; nothing else is a way to resume.
  const route = (mode: string) => ({
    upstreams: [{ id: "up1", kind: "openai-responses", base_url: "http://127.0.0.1:1" }],
    routes: [{
      model: "smart",
      resume_after_content: mode,
      candidates: [{ upstream: "up1", model: "m" }],
    }],
  });
  for (const mode of ["replay", "auto"]) {
    assert.equal(ConfigSchema.safeParse(route(mode)).success, true, mode);
  }
  const unknown = ConfigSchema.safeParse(route("regenerate"));
  assert.deepEqual(unknown.error?.issues.map((i) => i.path.join(".")), [
    "routes.0.resume_after_content",
  ]);
});

Deno.test("an abort while the resuming candidate starts ends the stream as aborted, the hop too", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true] },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      second!.enqueue({ headerDelay: "never" });
      const id = requestId();
      const { text } = await v.run((async () => {
        const pending = v.exchange("/v1/messages", {
          model: "smart",
          max_tokens: 100,
          stream: true,
          messages: [{ role: "user", content: "hi" }],
        }, { headers: { "x-request-id": id } });
        while (second!.calls.length === 0) await v.clock.sleep(1);
        const abort = await v.fetch(`${v.url}/request/${id}/abort`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN}` },
        });
        assert.deepEqual((await abort.json()).requests, [id]);
        return await pending;
      })());
      assert.match(text, /"text":"wor"/);
      assert.match(text, /event: error/);
      assert.equal(await second!.calls[0]!.closed, "cancelled");
      const { request, attempts } = await v.row(id);
      assert.equal(request.errorCode, "gw.request.aborted");
      assert.deepEqual(
        attempts.map((a) => [a.outcome, a.resumeOffset]),
        [["error", null], ["aborted", OFFSET]],
      );
    },
  );
});

Deno.test("an answer that sent only reasoning is not resumed: there is no text to continue", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, true] },
    async (v, [first, second]) => {
      const chunks = anthropicFake.streamChunks({
        text: [],
        thinking: ["Let me think"],
        usage: { input: 5, output: 2 },
      });
      first!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [...chunks.slice(0, 3).map((send) => ({ send })), { reset: true }],
      });
      second!.enqueue(anthropicScripts.second());
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.ok(read.error);
      assert.equal(second!.calls.length, 0);
      const { request } = await v.row(id);
      assert.equal(request.errorCode, "gw.upstream.error");
    },
  );
});

Deno.test("a Gemini client reading a JSON array gets one array with the continuation in it", async () => {
  await withResumeRoute(
    2,
    { kind: "gemini", prefill: [false, true] },
    async (v, [first, second]) => {
      const scripts = RESUME_SCRIPTS.gemini;
      first!.enqueue(scripts.first("reset"));
      second!.enqueue(scripts.second());
      const id = requestId();
      const res = await v.send("/v1beta/models/smart:streamGenerateContent", {
        contents: [{ role: "user", parts: [{ text: "Say hello to the world" }] }],
      }, { headers: { "x-request-id": id } });
      assert.equal(res.status, 200);
      const chunks: {
        candidates?: { content?: { parts?: { text?: string }[] }; finishReason?: string }[];
      }[] = JSON.parse(res.text);
      const text = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? [])
        .map((p) => p.text ?? "").join("");
      assert.equal(text, "Hello, world!");
      assert.equal(chunks.filter((c) => c.candidates?.[0]?.finishReason).length, 1);
      const { attempts } = await v.row(id);
      assert.deepEqual(attempts.map((a) => [a.outcome, a.resumeOffset]), [["error", null], [
        "resumed",
        OFFSET,
      ]]);
    },
  );
});

Deno.test("with resume on, an answer that never breaks still passes through byte for byte", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [true, true] },
    async (v, [first, second]) => {
      const chunks = anthropicFake.streamChunks({
        text: ["Hello, ", "world!"],
        usage: SECOND_USAGE,
      });
      first!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: chunks.map((send) => ({ send })),
      });
      const id = requestId();
      const res = await v.send("/v1/messages", {
        model: "smart",
        max_tokens: 100,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }, { headers: { "x-request-id": id } });
      assert.equal(res.text, chunks.join(""));
      assert.equal(second!.calls.length, 0);
      const { attempts } = await v.row(id);
      assert.deepEqual(attempts.map((a) => [a.outcome, a.resumeOffset]), [["success", null]]);
    },
  );
});

/** Each client through its SDK, with an upstream kind of its own format where one replays. */
const REPLAY_KINDS: Record<ClientFormat, PrefillKind> = {
  anthropic: "anthropic",
  "openai-chat": "openai-chat",
  "openai-responses": "openai-chat",
  gemini: "gemini",
};

for (const format of FORMATS) {
  const kind = REPLAY_KINDS[format];
  Deno.test(`${format} client, ${kind} upstreams: a replay that matches what the client has continues the answer`, async () => {
    const scripts = RESUME_SCRIPTS[kind];
    await withResumeRoute(
      2,
      { kind, prefill: [false, false], mode: "replay" },
      async (v, [first, second]) => {
        first!.enqueue(scripts.first("reset"));
        second!.enqueue(scripts.replay());
        const id = requestId();
        const read = await v.run(CLIENTS[format](v.url, { requestId: id, fetch: v.fetch }));
        assertOneAnswer(read);
        // The original request: the client's own turn last, no prefill.
        assert.equal(scripts.lastTurn(second!.calls[0]!).role, "user");
        const { request, attempts } = await v.row(id);
        assert.equal(request.outcome, "success");
        assert.deepEqual(
          attempts.map((a) => [a.outcome, a.resumeOffset]),
          [["error", null], ["resumed", OFFSET]],
        );
        // The replay's tokens are billed on its row, and the answer's usage sums the hops.
        const [hop1, hop2] = attempts;
        assert.deepEqual([hop2!.inputTokens, hop2!.outputTokens], [
          SECOND_USAGE.input,
          SECOND_USAGE.output,
        ]);
        assert.equal(read.usage.input, (hop1!.inputTokens ?? 0) + SECOND_USAGE.input);
        assert.equal(read.usage.output, (hop1!.outputTokens ?? 0) + SECOND_USAGE.output);
        assert.equal(request.inputTokens, read.usage.input);
      },
    );
  });
}

Deno.test("a replay that diverges: the client reads the original failure, nothing of the replay, which is closed", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, false], mode: "replay" },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      // Its text, then it would go on: the gateway closes it once it has parted.
      const chunks = anthropicFake.streamChunks({ text: ["Hello, there!"], usage: SECOND_USAGE });
      second!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [...chunks.slice(0, 3).map((send) => ({ send })), { hang: true }],
      });
      const id = requestId();
      const res = await v.send("/v1/messages", {
        model: "smart",
        max_tokens: 100,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }, { headers: { "x-request-id": id } });
      const body = res.text;
      assert.doesNotMatch(body, /there/);
      assert.match(body, /event: error/);
      assert.match(body, /broke off its stream/);
      assert.doesNotMatch(body, /replay|diverged/);
      assert.equal(await second!.calls[0]!.closed, "cancelled");
      const { request, attempts } = await v.row(id);
      assert.equal(request.errorCode, "gw.upstream.error");
      assert.deepEqual(attempts.map((a) => [a.outcome, a.errorCode, a.resumeOffset]), [
        ["error", "gw.upstream.error", null],
        ["replay_diverged", "gw.upstream.replay_diverged", OFFSET],
      ]);
      assert.match(attempts[1]!.errorMessage ?? "", /at character 7 of 10/);
      // The replay's usage is its row's, not the answer's.
      assert.equal(attempts[1]!.inputTokens, SECOND_USAGE.input);
      assert.equal(request.inputTokens, attempts[0]!.inputTokens);
    },
  );
});

Deno.test("a replay to an upstream of the client's format is sent the client's own body, fields the IR has no slot for included", async () => {
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, false], mode: "replay" },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      second!.enqueue(anthropicScripts.replay());
      const id = requestId();
      const sent = {
        model: "smart",
        max_tokens: 100,
        stream: true,
        temperature: 0,
        top_k: 1,
        messages: [{ role: "user", content: "hi" }],
      };
      const res = await v.send("/v1/messages", sent, { headers: { "x-request-id": id } });
      assert.match(res.text, /"text":"ld!"/);
      const got = second!.calls[0]!.json as Record<string, unknown>;
      assert.deepEqual({ ...got, model: "smart" }, sent);
    },
  );
});

Deno.test("the client is kept alive while a slow replay catches up, and gets nothing else until it has", async () => {
  let caughtUp = () => {};
  const gate = new Promise<void>((resolve) => (caughtUp = resolve));
  await withResumeRoute(
    2,
    { kind: "anthropic", prefill: [false, false], mode: "replay" },
    async (v, [first, second]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      const chunks = anthropicFake.streamChunks({
        text: ["Hello, w", "or", "ld!"],
        usage: SECOND_USAGE,
      });
      // Through "Hello, w", then held back for 40 s: the client has had two keep-alives.
      v.clock.after(40_000, caughtUp);
      second!.enqueue({
        headers: { "content-type": "text/event-stream" },
        body: [
          ...chunks.slice(0, 3).map((send) => ({ send })),
          { until: gate },
          ...chunks.slice(3)
            .map((send) => ({ send })),
        ],
      });
      const res = await v.send("/v1/messages", {
        model: "smart",
        max_tokens: 100,
        stream: true,
        messages: [{ role: "user", content: "hi" }],
      }, { headers: { "x-request-id": requestId() } });
      const body = res.text;
      // Keep-alives from the last bytes the client had ("wor", at once) until the rest at 40 s.
      const worAt = res.pieces.findIndex((p) => p.text.includes('"text":"wor"'));
      const keepAlives = res.pieces.slice(worAt).filter((p) => p.text === ": keep-alive\n\n");
      assert.equal(res.pieces[worAt]?.at, 0);
      // (One at once, as the replay starts, then one each 15 s of silence.)
      assert.deepEqual(keepAlives.map((p) => p.at), [0, 15_000, 30_000]);
      assert.equal(res.pieces.find((p) => p.text.includes('"text":"ld!"'))?.at, 40_000);
      const wor = '"text":"wor"}}\n\n';
      const afterWor = body.slice(body.indexOf(wor) + wor.length);
      // Between what the first upstream sent and the relayed rest: keep-alives only.
      const seam = afterWor.slice(0, afterWor.indexOf("event:"));
      assert.match(seam, /^(: keep-alive\n\n){3}$/);
      assert.match(afterWor.slice(seam.length), /^event: content_block_delta\n.*"text":"ld!"/);
      assert.match(afterWor, /message_stop/);
    },
  );
});

Deno.test("auto: a candidate marked for prefill is sent one, the others replay, in route order", async () => {
  await withResumeRoute(
    3,
    { kind: "anthropic", prefill: [false, true, false], mode: "auto" },
    async (v, [first, prefilling, replaying]) => {
      first!.enqueue(anthropicScripts.first("reset"));
      prefilling!.enqueue(refusesPrefill());
      replaying!.enqueue(anthropicScripts.replay());
      const id = requestId();
      const read = await v.run(CLIENTS.anthropic(v.url, { requestId: id, fetch: v.fetch }));
      assert.equal(read.error, undefined);
      assert.equal(read.text, "Hello, world!");
      assert.deepEqual(anthropicScripts.lastTurn(prefilling!.calls[0]!), {
        role: "assistant",
        text: "Hello, wor",
      });
      assert.equal(anthropicScripts.lastTurn(replaying!.calls[0]!).role, "user");
      const { attempts } = await v.row(id);
      assert.deepEqual(
        attempts.map((a) => [a.outcome, a.status, a.resumeOffset]),
        [["error", 200, null], ["error", 400, OFFSET], ["resumed", 200, OFFSET]],
      );
    },
  );
});
