/**
 * Hostile upstreams (docs/security.md): answers, events and error bodies over their caps, huge
 * vectors, thousands of continuation tokens; each is refused at its cap and the next candidate
 * answers. The gateway runs whole in virtual time (tests/virtual_gateway.ts) at its default idle
 * timeout; the parsers' own tests run as plain functions.
 */
import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import { chatRoute } from "../harness.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";
import {
  chatStream,
  chatStreamBlocks,
  chatWhole,
  chatWholeBody,
} from "../fake_upstreams/openai_chat_script.ts";
import { type FakeUpstream, type Step } from "../fake_upstreams/server.ts";
import { UPSTREAM_CAPS } from "../../gateway/formats/upstream_caps.ts";
import { RESUME_HELD_CHARS } from "../../gateway/forward/stream_resume.ts";
import { SseParser } from "../../gateway/formats/sse_stream.ts";
import { eventStreamCodec, EventStreamSplitter } from "../../gateway/formats/bedrock/stream.ts";
import { validateConfig } from "../../gateway/config/validate.ts";
import { type Upstream, upstreamBaseUrl } from "../../gateway/config/schema.ts";
import { withoutTrailingSlashes } from "../../gateway/config/trailing_slashes.ts";
import { DestinationSchema } from "../../gateway/observability/destination_schema.ts";
import {
  type InteractionsScript,
  interactionsStreamChunks,
  interactionsWholeBody,
} from "../fake_upstreams/interactions_script.ts";

const MiB = 1024 * 1024;
const failover = { retries_per_candidate: 0 };
const ask = (stream: boolean) => ({
  model: "smart",
  stream,
  messages: [{ role: "user", content: "hi" }],
});
const good = { text: ["second ", "answer"], usage: { input: 3, output: 2 } };
const ONE_TOKEN = { input: 1, output: 1 };

/** How many continuation handles are bound, every key's together (migration 23). */
async function bound(v: VirtualGateway): Promise<number> {
  const result = await v.gw.db.client.execute("SELECT COUNT(*) AS n FROM continuation_owners");
  return Number(result.rows[0]?.n ?? 0);
}

/** A whole Interactions answer. */
function interactionsAnswer(script: InteractionsScript) {
  return {
    headers: { "content-type": "application/json" },
    body: [{ send: interactionsWholeBody(script) }],
  };
}

/** `bytes` of `data: xxx…` with no blank line, sent in 1 MiB pieces. */
function endlessEvent(bytes: number): Step[] {
  const piece = "x".repeat(MiB);
  const steps: Step[] = [{ send: "data: " }];
  for (let sent = 0; sent < bytes; sent += MiB) steps.push({ send: piece });
  return steps;
}

/** A whole gateway in virtual time over in-process fakes; `run` runs in virtual time. */
async function withGateway(
  run: (v: VirtualGateway, ups: FakeUpstream[]) => Promise<void>,
  opts: {
    upstreams?: number;
    config?: (urls: string[]) => ConfigInput;
    env?: Record<string, string>;
  },
): Promise<void> {
  await using v = await startVirtualGateway({ ...opts, failover });
  await v.run(run(v, v.ups));
}

/** Two fake upstreams behind one chat route. */
function withTwo(run: (v: VirtualGateway, ups: FakeUpstream[]) => Promise<void>): Promise<void> {
  return withGateway(run, { upstreams: 2 });
}

/** A JSON POST to the gateway's handler (a chat completion unless `path` says). */
function post(v: VirtualGateway, body: unknown, path = "/v1/chat/completions"): Promise<Response> {
  return v.fetch(`${v.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

Deno.test("an SSE event over the cap before content: the next candidate answers", async () => {
  await withTwo(async (v, [a, b]) => {
    a!.setHandler(() => ({
      headers: { "content-type": "text/event-stream" },
      body: [...endlessEvent(UPSTREAM_CAPS.eventBytes + MiB), { hang: true }],
    }));
    b!.setHandler(() => chatStream(good));
    const res = await post(v, ask(true));
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.match(text, /second /);
    assert.doesNotMatch(text, /xxxx/);
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome, x.errorCode]), [
      ["up1", "error", "gw.upstream.oversized"],
      ["up2", "success", null],
    ]);
    assert.equal(await a!.calls[0]!.closed, "cancelled");
  });
});

Deno.test("an SSE event over the cap after content: the client's stream ends with an error event", async () => {
  await withTwo(async (v, [a, b]) => {
    const opening = chatStreamBlocks({ text: ["first part"] }).slice(0, 2);
    a!.setHandler(() => ({
      headers: { "content-type": "text/event-stream" },
      body: [
        ...opening.map((send) => ({ send })),
        ...endlessEvent(UPSTREAM_CAPS.eventBytes + MiB),
        { hang: true },
      ],
    }));
    b!.setHandler(() => chatStream(good));
    const res = await post(v, ask(true));
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.match(text, /first part/);
    assert.doesNotMatch(text, /xxxx/);
    const last = text.trim().split("\n\n").at(-1)!;
    const event = JSON.parse(last.replace(/^data: /, ""));
    assert.equal(event.error.code, "gw.upstream.oversized");
    const { request, attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.equal(request.errorCode, "gw.upstream.oversized");
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome, x.errorCode]), [
      ["up1", "error", "gw.upstream.oversized"],
    ]);
    assert.equal(b!.calls.length, 0);
  });
});

Deno.test("a stream past the resume's held cap is not resumed: its break ends it, the fallback is never called", async () => {
  // Without the cap, a route with resume kept all the client got, for as long as it streamed.
  const pieces = Math.ceil(RESUME_HELD_CHARS / MiB) + 1;
  await withGateway(async (v, [a, b]) => {
    const blocks = chatStreamBlocks({ text: Array(pieces).fill("x".repeat(MiB)) });
    a!.setHandler(() => ({
      headers: { "content-type": "text/event-stream" },
      body: [...blocks.slice(0, 1 + pieces).map((send) => ({ send })), { reset: true }],
    }));
    b!.setHandler(() => chatStream(good));
    const res = await post(v, ask(true));
    const text = await res.text();
    assert.equal(res.status, 200);
    const last = JSON.parse(text.trim().split("\n\n").at(-1)!.replace(/^data: /, ""));
    assert.equal(last.error.code, "gw.upstream.error");
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome]), [["up1", "error"]]);
    assert.equal(b!.calls.length, 0);
  }, {
    upstreams: 2,
    config: (urls) => ({
      ...chatRoute(urls, { failover }),
      routes: [{
        model: "smart",
        resume_after_content: "replay",
        candidates: urls.map((_, i) => ({ upstream: `up${i + 1}`, model: `model-${i + 1}` })),
      }],
    }),
  });
});

Deno.test("a whole answer over the cap: the next candidate answers", async () => {
  await withTwo(async (v, [a, b]) => {
    const huge = chatWholeBody({ text: ["y".repeat(UPSTREAM_CAPS.answerBytes + MiB)] });
    a!.setHandler(() => ({ body: [{ send: huge }] }));
    b!.setHandler(() => chatWhole(good));
    const res = await post(v, ask(false));
    const body = await res.json();
    assert.equal(res.status, 200);
    assert.equal(body.choices[0].message.content, "second answer");
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome, x.errorCode]), [
      ["up1", "error", "gw.upstream.oversized"],
      ["up2", "success", null],
    ]);
  });
});

/** An embeddings request of one input (docs/providers.md "Embeddings") to the chat route's upstreams. */
function embedOne(v: VirtualGateway): Promise<Response> {
  return post(v, { model: "smart", input: "x" }, "/v1/embeddings");
}

const goodVector = { body: [{ send: '{"data":[{"embedding":[0.5,0.25]}]}' }] };

Deno.test("an embeddings answer of one 30 MiB array is refused at its 8,193rd value: the read stops there", async () => {
  await withTwo(async (v, [a, b]) => {
    // One vector of 15 million values, under the whole-answer cap: it was read whole and parsed
    // (2.3 s, 328 MB in the review) before its length was checked.
    const steps: Step[] = [{ send: '{"data":[{"embedding":[' }];
    // In 16 KiB pieces, as a socket hands them over: the 8,193rd value comes before the call's
    // byte cap (the next test) is crossed.
    const piece = "1,".repeat(8 * 1024);
    for (let sent = 0; sent < 30 * MiB; sent += piece.length) steps.push({ send: piece });
    a!.setHandler(() => ({ body: [...steps, { send: "1]}]}" }] }));
    b!.setHandler(() => goodVector);
    const res = await embedOne(v);
    assert.equal(res.status, 200);
    assert.deepEqual((await res.json()).data[0].embedding, [0.5, 0.25]);
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome, x.errorCode]), [
      ["up1", "error", "gw.upstream.bad_response"],
      ["up2", "success", null],
    ]);
    assert.match(attempts[0]!.errorMessage ?? "", /over 8192 values/);
    assert.equal(await a!.calls[0]!.closed, "cancelled");
  });
});

Deno.test("an embeddings answer larger than any answer to its inputs could be is cut at the call's cap", async () => {
  await withTwo(async (v, [a, b]) => {
    // One input's answer with 2 MiB beside its vector: far under the 32 MiB of a chat answer,
    // far over what one vector of at most 8,192 values takes.
    const padding = '","padding":"' + "p".repeat(2 * MiB);
    a!.setHandler(() => ({
      body: [{ send: '{"data":[{"embedding":[0.5,0.25]}],"model":"m' }, { send: padding }, {
        send: '"}',
      }],
    }));
    b!.setHandler(() => goodVector);
    const res = await embedOne(v);
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.outcome, x.errorCode]), [
      ["up1", "error", "gw.upstream.oversized"],
      ["up2", "success", null],
    ]);
    assert.match(attempts[0]!.errorMessage ?? "", /over the gateway's cap of \d{6} bytes/);
  });
});

Deno.test("an error body is read only to its cap, its start kept for the message", async () => {
  await withTwo(async (v, [a, b]) => {
    // 10 MB of error body that then never ends: reading it whole would wait for ever.
    const steps: Step[] = [{ send: '{"error":{"message":"overloaded, really ' }];
    for (let i = 0; i < 10; i++) steps.push({ send: "z".repeat(MiB) });
    a!.setHandler(() => ({ status: 503, body: [...steps, { hang: true }] }));
    b!.setHandler(() => chatWhole(good));
    const res = await post(v, ask(false));
    assert.equal(res.status, 200);
    assert.equal((await res.json()).choices[0].message.content, "second answer");
    const { attempts } = await v.rowIn(res.headers.get("x-request-id")!);
    assert.deepEqual(attempts.map((x) => [x.upstream, x.status, x.errorCode]), [
      ["up1", 503, "gw.upstream.error"],
      ["up2", 200, null],
    ]);
    assert.match(attempts[0]!.errorMessage ?? "", /overloaded, really z/);
    assert.ok((attempts[0]!.errorMessage ?? "").length < 1000);
    assert.equal(await a!.calls[0]!.closed, "cancelled");
  });
});

Deno.test("a same-format client never gets an error body cut at the cap as the upstream's answer", async () => {
  await withTwo(async (v, [a]) => {
    const cut = '{"error":{"message":"bad ' + "q".repeat(UPSTREAM_CAPS.errorBodyBytes) + '"}}';
    a!.setHandler(() => ({ status: 400, body: [{ send: cut }] }));
    const res = await post(v, ask(false));
    // Our own rendering, whole JSON: the cut text is not JSON, so its first 200 characters say it.
    const body = await res.json();
    assert.equal(res.status, 400);
    assert.equal(res.headers.get("x-pulsegate-error-code"), "gw.upstream.rejected");
    assert.match(body.error.message, /^\{"error":\{"message":"bad q{175} \(tried: up1\)$/);
  });
});

Deno.test("an upstream's 'model not there' naming another model than the one it was sent is the caller's: passed back, nothing charged", async () => {
  await withTwo(async (v, [a, b]) => {
    // A model the caller chose (a tool's): only the sent model's absence is the member's fault
    // (docs/design.md "Cooldown"), else a caller could pause a member for every key.
    const error = {
      message: "The model `model-1-image` does not exist or you do not have access to it.",
      type: "invalid_request_error",
      param: "tools[0].model",
      code: "model_not_found",
    };
    a!.setHandler(() => ({ status: 404, body: [{ send: JSON.stringify({ error }) }] }));
    for (let i = 0; i < 3; i++) {
      const res = await post(v, ask(false));
      assert.equal(res.status, 404);
      assert.equal((await res.json()).error.code, "model_not_found");
    }
    assert.equal(b!.calls.length, 0, "no failover: the caller's own error");
    assert.equal(v.gw.cooldowns.get("up1/model-1").consecutiveFailures, 0);
    assert.equal(v.gw.cooldowns.get("up1").consecutiveFailures, 0);
  });
});

// --- parsers are linear and capped -------------------------------------------

Deno.test("the SSE parser searches each byte once: a 2 MiB event in 64-byte chunks", () => {
  const parser = new SseParser();
  const chunk = new TextEncoder().encode("x".repeat(64));
  const started = performance.now();
  assert.deepEqual(parser.push(new TextEncoder().encode("data: ")), []);
  for (let sent = 0; sent < 2 * MiB; sent += 64) assert.deepEqual(parser.push(chunk), []);
  const [event] = parser.push(new TextEncoder().encode("\n\n"));
  const ms = performance.now() - started;
  assert.equal(event?.data?.length, 2 * MiB);
  // Linear is a few tens of ms; searching the block again per chunk took 10 s and more.
  assert.ok(ms < 2000, `${ms} ms`);
});

Deno.test("the SSE parser flags a block over its cap as soon as it crosses it", () => {
  const parser = new SseParser({ maxEventChars: MiB });
  const chunk = new TextEncoder().encode("y".repeat(64));
  let pushes = 0;
  while (!parser.oversized && pushes < (4 * MiB) / 64) {
    assert.deepEqual(parser.push(chunk), []);
    pushes++;
  }
  assert.equal(parser.oversized, true);
  assert.equal(pushes, MiB / 64 + 1);
  // Nothing more is taken, not even a blank line.
  assert.deepEqual(parser.push(new TextEncoder().encode("\n\ndata: {}\n\n")), []);
  assert.deepEqual(parser.end(), []);
  // Blocks before the cap still come out, split anywhere.
  const fine = new SseParser({ maxEventChars: 16 });
  assert.deepEqual(fine.push(new TextEncoder().encode("data: 1\n\nda")).map((e) => e.data), ["1"]);
  assert.deepEqual(fine.push(new TextEncoder().encode("ta: 2\r")).map((e) => e.data), []);
  assert.deepEqual(fine.push(new TextEncoder().encode("\n\r\n")).map((e) => e.data), ["2"]);
  assert.equal(fine.oversized, false);
});

Deno.test("the Bedrock splitter copies a message once, and refuses one announced over the cap", () => {
  const payload = new TextEncoder().encode(JSON.stringify({ text: "w".repeat(2 * MiB) }));
  const message = eventStreamCodec.encode({
    headers: { ":message-type": { type: "string", value: "event" } },
    body: payload,
  });
  const splitter = new EventStreamSplitter();
  const started = performance.now();
  const out: Uint8Array[] = [];
  for (let at = 0; at < message.byteLength; at += 64) {
    out.push(...splitter.push(message.subarray(at, at + 64)));
  }
  const ms = performance.now() - started;
  assert.equal(out.length, 1);
  assert.deepEqual(out[0], message);
  assert.ok(ms < 2000, `${ms} ms`);

  const capped = new EventStreamSplitter({ maxMessageBytes: MiB });
  const prelude = new Uint8Array(8);
  new DataView(prelude.buffer).setUint32(0, MiB + 1);
  assert.deepEqual(capped.push(prelude), []);
  assert.equal(capped.failure?.code, "gw.upstream.oversized");
  assert.deepEqual(capped.push(message), []);
});

// --- URL lengths ---------------------------------------------------------------

Deno.test("a base_url over 2048 characters is refused by validation, quickly", () => {
  const started = performance.now();
  const result = validateConfig({
    upstreams: [{ id: "a", kind: "openai-chat", base_url: `http://x/${"/".repeat(80_000)}a` }],
    routes: [{ model: "smart", candidates: [{ upstream: "a", model: "m" }] }],
  });
  assert.ok(performance.now() - started < 2000);
  assert.equal(result.ok, false);
  assert.deepEqual(!result.ok && result.problems, [
    { path: "upstreams.0.base_url", message: "must be at most 2048 characters", kind: "invalid" },
  ]);
});

Deno.test("an observability destination's url has the same cap", () => {
  const url = `https://logs.example/${"a".repeat(2048)}`;
  const result = DestinationSchema.safeParse({ id: "d", kind: "webhook", url });
  assert.equal(result.success, false);
  assert.deepEqual(result.error?.issues.map((i) => i.message), [
    "must be at most 2048 characters",
  ]);
});

Deno.test("trailing slashes are trimmed in linear time, however many", () => {
  assert.equal(withoutTrailingSlashes("http://x/v1///"), "http://x/v1");
  assert.equal(withoutTrailingSlashes("http://x/v1"), "http://x/v1");
  assert.equal(withoutTrailingSlashes("///"), "");
  const started = performance.now();
  assert.equal(withoutTrailingSlashes(`http://x${"/".repeat(200_000)}`), "http://x");
  // A long run of slashes that is not at the end: the regex retried it from every slash.
  const inside = `http://x/${"/".repeat(80_000)}a`;
  const upstream = { kind: "openai-chat", id: "a", base_url: inside } as Upstream;
  assert.equal(upstreamBaseUrl(upstream), inside);
  const ms = performance.now() - started;
  assert.ok(ms < 1000, `${ms} ms`);
});

// --- Continuation tokens ---------------------------------------------------------

Deno.test("an upstream handing back 5,000 continuation tokens in one answer gets the first 64 bound to the key; the client still reads every event", async () => {
  const checkpoints = Array.from(
    { length: 5_000 },
    (_, i) =>
      `event: interaction.status_update\ndata: ${
        JSON.stringify({
          interaction_id: "i_1",
          status: "in_progress",
          continuation_token: `ckpt-${i}`,
          event_type: "interaction.status_update",
        })
      }\n\n`,
  );
  const chunks = interactionsStreamChunks({ id: "i_1", text: ["Hel", "lo"], usage: ONE_TOKEN });
  // After the first text delta: content flowed, so every checkpoint is passed on.
  const body = [...chunks.slice(0, 4), ...checkpoints, ...chunks.slice(4)];
  const key = { "x-goog-api-key": "hostile-key" };
  await withGateway(async (v, [up]) => {
    up!.setHandler(() => ({
      headers: { "content-type": "text/event-stream" },
      body: [{ send: body.join("") }],
    }));
    const ask = (extra: Record<string, unknown>) =>
      v.fetch(`${v.url}/v1beta/interactions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...key },
        body: JSON.stringify({ model: "smart", input: "hi", store: false, ...extra }),
      });
    const res = await ask({ stream: true });
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.equal(text.match(/"continuation_token":"ckpt-\d+"/g)?.length, 5_000);
    assert.match(text, /interaction\.completed/);
    while ((await bound(v)) !== 64) await v.clock.sleep(100);
    up!.setHandler(() => interactionsAnswer({ id: "i_2", text: ["ok"], usage: ONE_TOKEN }));
    const calls = up!.calls.length;
    const past = await ask({ continuation_token: "ckpt-64" });
    assert.equal(past.status, 404, await past.text());
    assert.equal(up!.calls.length, calls);
    const first = await ask({ continuation_token: "ckpt-0" });
    assert.equal(first.status, 200, await first.text());
    assert.equal(await bound(v), 64);
  }, {
    config: ([url]) => ({
      failover,
      upstreams: [{ id: "up1", kind: "gemini-interactions", base_url: url! }],
      routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "g" }] }],
      keys: [{ id: "hostile", key_env: "HOSTILE_KEY" }],
    }),
    env: { HOSTILE_KEY: "hostile-key" },
  });
});
