import assert from "node:assert/strict";
import type { AttemptOutcome, RequestRecord } from "../db/records.ts";
import type { ConfigInput } from "../gateway/config/schema.ts";
import { otlpTraces } from "../gateway/observability/otlp_traces.ts";
import { incomingTrace, newSpanId, parseTraceparent } from "../gateway/live/trace_context.ts";
import { eventually, postJson, startTestGateway, type TestGateway } from "./harness.ts";
import { chatError, chatStream, chatWhole } from "./fake_upstreams/openai_chat_script.ts";
import * as anthropicFake from "./fake_upstreams/anthropic_script.ts";
import { type FakeUpstream, startFakeUpstream } from "./fake_upstreams/server.ts";

/** One span as the fake collector decodes it, attributes flattened to plain values. */
interface Span {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState?: string;
  flags: number;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attrs: Record<string, string | number | boolean>;
  events: Array<{ name: string; timeUnixNano: string }>;
  status: { code: number; message?: string };
}

interface RawAttr {
  key: string;
  value: { stringValue?: string; intValue?: string; doubleValue?: number; boolValue?: boolean };
}

const SERVER = 2;
const CLIENT = 3;
const OK = 1;
const ERROR = 2;
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const messages = [{ role: "user", content: "a secret prompt" }];

/** A fake OTLP/HTTP collector: every POST to /v1/traces, decoded from OTLP JSON. */
class Collector {
  readonly server: FakeUpstream = startFakeUpstream({ fallback: () => ({ status: 200 }) });

  get url(): string {
    return `${this.server.url}/v1/traces`;
  }

  get spans(): Span[] {
    return this.server.calls.filter((c) => c.path === "/v1/traces").flatMap((call) => {
      assert.equal(call.headers.get("content-type"), "application/json");
      const body = call.json as {
        resourceSpans: Array<{
          resource: { attributes: RawAttr[] };
          scopeSpans: Array<{ scope: { name: string }; spans: Array<Record<string, unknown>> }>;
        }>;
      };
      return body.resourceSpans.flatMap((rs) => {
        assert.equal(flatten(rs.resource.attributes)["service.name"], "pulsegate");
        return rs.scopeSpans.flatMap((ss) =>
          ss.spans.map((s) => ({ ...s, attrs: flatten(s.attributes as RawAttr[]) }) as Span)
        );
      });
    });
  }

  /** Waits for the request span with this request id and its attempt spans. */
  async trace(requestId: string, attempts: number): Promise<{ request: Span; hops: Span[] }> {
    let found: { request: Span; hops: Span[] } | undefined;
    await eventually(() => {
      const all = this.spans;
      const request = all.find((s) =>
        s.kind === SERVER && s.attrs["pulsegate.request_id"] === requestId
      );
      const hops = all.filter((s) =>
        s.kind === CLIENT && s.attrs["pulsegate.request_id"] === requestId
      ).sort((a, b) => Number(a.attrs["pulsegate.hop"]) - Number(b.attrs["pulsegate.hop"]));
      if (request && hops.length >= attempts) found = { request, hops };
      return found !== undefined;
    }, { what: `the spans of ${requestId}` });
    return found!;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}

function flatten(attrs: RawAttr[]): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attrs) {
    out[key] = value.stringValue ??
      (value.intValue !== undefined
        ? Number(value.intValue)
        : value.doubleValue ?? value.boolValue!);
  }
  return out;
}

async function addTraces(gw: TestGateway, url: string): Promise<void> {
  const res = await postJson(`${gw.url}/admin/api/destinations`, {
    id: "traces",
    kind: "otlp-traces",
    url,
  });
  assert.equal(res.status, 201, await res.clone().text());
  assert.equal((await res.json()).kind, "otlp-traces");
}

/** up1 (openai-chat) then up2 (anthropic), no retries: one failure moves straight on. */
function twoKinds(chatUrl: string, claudeUrl: string): ConfigInput {
  return {
    failover: { retries_per_candidate: 0 },
    upstreams: [
      { id: "up1", kind: "openai-chat", base_url: chatUrl },
      { id: "up2", kind: "anthropic", base_url: claudeUrl },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: "gpt-x" }, { upstream: "up2", model: "claude-x" }],
    }],
  };
}

function upstreamTraceparent(up: FakeUpstream, n = 0): string | null {
  return up.calls[n]!.headers.get("traceparent");
}

Deno.test("traces: a failed-over request is one SERVER span over two CLIENT spans, with GenAI attributes and statuses", async () => {
  const chat = startFakeUpstream({ fallback: () => chatError(503, "overloaded") });
  const claude = startFakeUpstream({
    fallback: () => ({
      body: [{
        send: anthropicFake.wholeBody({
          text: ["hi"],
          usage: { input: 7, output: 3, cacheRead: 2 },
        }),
      }],
    }),
  });
  const collector = new Collector();
  await using gw = await startTestGateway(twoKinds(chat.url, claude.url));
  try {
    await addTraces(gw, collector.url);
    const hook = await postJson(`${gw.url}/admin/api/destinations`, {
      kind: "webhook",
      url: `${collector.server.url}/hook`,
    });
    assert.equal(hook.status, 201);
    await hook.body?.cancel();
    const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      "x-session-id": "conv-1",
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const id = res.headers.get("x-request-id")!;
    const { request, hops } = await collector.trace(id, 2);

    // No traceparent from the client: a new trace, the request span its root.
    assert.match(request.traceId, HEX32);
    assert.match(request.spanId, HEX16);
    assert.equal(request.parentSpanId, "");
    assert.equal(request.name, "chat smart");
    assert.deepEqual(request.status, { code: OK });
    assert.equal(request.attrs["gen_ai.operation.name"], "chat");
    assert.equal(request.attrs["gen_ai.request.model"], "smart");
    assert.equal(request.attrs["gen_ai.response.model"], "claude-x");
    assert.equal(request.attrs["gen_ai.provider.name"], "anthropic");
    // Input tokens include the cached ones, as the GenAI conventions ask.
    assert.equal(request.attrs["gen_ai.usage.input_tokens"], 9);
    assert.equal(request.attrs["gen_ai.usage.output_tokens"], 3);
    assert.equal(request.attrs["gen_ai.usage.cache_read.input_tokens"], 2);
    assert.equal(request.attrs["gen_ai.conversation.id"], "conv-1");
    assert.equal(request.attrs["http.response.status_code"], 200);
    assert.equal(request.attrs["pulsegate.route"], "smart");
    assert.equal(request.attrs["pulsegate.session_id"], "conv-1");
    assert.equal(request.attrs["pulsegate.outcome"], "success");
    assert.equal(request.attrs["pulsegate.stream"], false);
    assert.equal(request.attrs["error.type"], undefined);
    assert.equal(BigInt(request.endTimeUnixNano) >= BigInt(request.startTimeUnixNano), true);

    assert.equal(hops.length, 2);
    const [failed, answered] = hops as [Span, Span];
    for (const hop of hops) {
      assert.equal(hop.traceId, request.traceId);
      assert.equal(hop.parentSpanId, request.spanId);
      assert.match(hop.spanId, HEX16);
      assert.equal(hop.attrs["gen_ai.operation.name"], "chat");
      assert.equal(hop.attrs["server.address"], "127.0.0.1");
      assert.ok(BigInt(hop.startTimeUnixNano) >= BigInt(request.startTimeUnixNano));
      assert.ok(BigInt(hop.endTimeUnixNano) <= BigInt(request.endTimeUnixNano));
    }
    assert.notEqual(failed.spanId, answered.spanId);
    assert.equal(failed.name, "chat gpt-x");
    assert.equal(failed.attrs["gen_ai.provider.name"], "openai");
    assert.equal(failed.attrs["gen_ai.request.model"], "gpt-x");
    assert.equal(failed.attrs["server.port"], Number(new URL(chat.url).port));
    assert.equal(failed.attrs["pulsegate.hop"], 1);
    assert.equal(failed.attrs["pulsegate.upstream"], "up1");
    assert.equal(failed.attrs["pulsegate.outcome"], "error");
    assert.equal(failed.attrs["http.response.status_code"], 503);
    assert.equal(failed.attrs["error.type"], failed.attrs["pulsegate.error_code"]);
    assert.ok(failed.attrs["error.type"], "a failed attempt names its error");
    assert.equal(failed.status.code, ERROR, "the failed-over attempt is an error");
    assert.match(failed.status.message ?? "", /overloaded/);
    assert.equal(failed.attrs["gen_ai.response.model"], undefined);

    assert.equal(answered.name, "chat claude-x");
    assert.equal(answered.attrs["gen_ai.provider.name"], "anthropic");
    assert.equal(answered.attrs["gen_ai.response.model"], "claude-x");
    assert.equal(answered.attrs["gen_ai.usage.input_tokens"], 9);
    assert.equal(answered.attrs["pulsegate.hop"], 2);
    assert.equal(answered.attrs["server.port"], Number(new URL(claude.url).port));
    assert.deepEqual(answered.status, { code: OK });
    assert.deepEqual(answered.events.map((e) => e.name), [
      "pulsegate.headers",
      "pulsegate.first_content",
    ]);

    // Each upstream call named its own attempt's span in the same trace.
    assert.equal(upstreamTraceparent(chat), `00-${request.traceId}-${failed.spanId}-01`);
    assert.equal(upstreamTraceparent(claude), `00-${request.traceId}-${answered.spanId}-01`);
    assert.equal(chat.calls[0]!.headers.get("tracestate"), null);

    // A webhook's record carries the same ids.
    await eventually(() => collector.server.calls.some((c) => c.path === "/hook"));
    const record = (collector.server.calls.find((c) => c.path === "/hook")!.json as {
      records: Array<{
        request: { trace: { traceId: string; spanId: string } };
        attempts: Array<{ trace: { spanId: string } }>;
      }>;
    }).records[0]!;
    assert.equal(record.request.trace.traceId, request.traceId);
    assert.equal(record.request.trace.spanId, request.spanId);
    assert.deepEqual(record.attempts.map((a) => a.trace.spanId), [failed.spanId, answered.spanId]);

    // Never the prompt, never a credential.
    const sent = JSON.stringify(collector.server.calls.map((c) => c.json));
    assert.ok(!sent.includes("secret prompt"));
  } finally {
    await collector.close();
    await chat.close();
    await claude.close();
  }
});

Deno.test("traces: the client's traceparent and tracestate are continued and passed upstream; a failed request is ERROR", async () => {
  const up1 = startFakeUpstream({ fallback: () => chatError(500, "boom") });
  const up2 = startFakeUpstream({ fallback: () => chatError(502, "bad gateway") });
  const collector = new Collector();
  const config: ConfigInput = {
    failover: { retries_per_candidate: 0 },
    upstreams: [
      { id: "up1", kind: "openai-chat", base_url: up1.url },
      { id: "up2", kind: "openai-chat", base_url: up2.url },
    ],
    routes: [{
      model: "smart",
      candidates: [{ upstream: "up1", model: "m1" }, { upstream: "up2", model: "m2" }],
    }],
  };
  await using gw = await startTestGateway(config);
  try {
    await addTraces(gw, collector.url);
    const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
      tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
    });
    assert.ok(res.status >= 500);
    await res.body?.cancel();
    const id = res.headers.get("x-request-id")!;
    const { request, hops } = await collector.trace(id, 2);
    assert.equal(request.traceId, CLIENT_TRACE);
    assert.equal(request.parentSpanId, CLIENT_SPAN);
    assert.notEqual(request.spanId, CLIENT_SPAN);
    assert.equal(request.traceState, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    assert.equal(request.flags & 0x301, 0x301, "sampled, with a remote parent");
    assert.equal(request.status.code, ERROR);
    assert.match(request.status.message ?? "", /tried: up1 → up2/);
    assert.equal(request.attrs["error.type"], request.attrs["pulsegate.error_code"]);
    assert.equal(request.attrs["pulsegate.failure_source"], "upstream");
    assert.equal(request.attrs["pulsegate.outcome"], "error");
    assert.equal(request.attrs["gen_ai.response.model"], undefined);
    for (const [i, up] of [up1, up2].entries()) {
      const hop = hops[i]!;
      assert.equal(hop.traceId, CLIENT_TRACE);
      assert.equal(hop.parentSpanId, request.spanId);
      assert.equal(hop.status.code, ERROR);
      assert.equal(hop.flags & 0x301, 0x101, "sampled, parent local");
      assert.equal(upstreamTraceparent(up), `00-${CLIENT_TRACE}-${hop.spanId}-01`);
      assert.equal(
        up.calls[0]!.headers.get("tracestate"),
        "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
      );
    }
  } finally {
    await collector.close();
    await up1.close();
    await up2.close();
  }
});

const BAD_TRACEPARENTS = [
  `00-${CLIENT_TRACE.toUpperCase()}-${CLIENT_SPAN}-01`, // hex must be lowercase
  `00-${"0".repeat(32)}-${CLIENT_SPAN}-01`, // all-zero trace id
  `00-${CLIENT_TRACE}-${"0".repeat(16)}-01`, // all-zero parent id
  `ff-${CLIENT_TRACE}-${CLIENT_SPAN}-01`, // version ff is forbidden
  `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01-extra`, // version 00 has exactly four fields
  `00-${CLIENT_TRACE.slice(1)}-${CLIENT_SPAN}-01`, // short trace id
  "not a traceparent",
];

Deno.test("traces: an invalid traceparent is ignored: a new trace, and its tracestate is dropped", async () => {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["ok"] }) });
  const collector = new Collector();
  await using gw = await startTestGateway({
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m1" }] }],
  });
  try {
    await addTraces(gw, collector.url);
    const seen = new Set<string>();
    for (const [n, bad] of BAD_TRACEPARENTS.entries()) {
      const res = await postJson(`${gw.url}/v1/chat/completions`, { model: "smart", messages }, {
        traceparent: bad,
        tracestate: "congo=t61rcWkgMzE",
      });
      assert.equal(res.status, 200, bad);
      await res.body?.cancel();
      const { request, hops } = await collector.trace(res.headers.get("x-request-id")!, 1);
      assert.match(request.traceId, HEX32, bad);
      assert.notEqual(request.traceId, CLIENT_TRACE, bad);
      assert.equal(request.parentSpanId, "", bad);
      assert.equal(request.traceState, undefined, bad);
      assert.ok(!seen.has(request.traceId), "each request starts its own trace");
      seen.add(request.traceId);
      assert.equal(upstreamTraceparent(up, n), `00-${request.traceId}-${hops[0]!.spanId}-01`);
      assert.equal(up.calls[n]!.headers.get("tracestate"), null);
    }
  } finally {
    await collector.close();
    await up.close();
  }
});

Deno.test("traces: a streamed request through the openai SDK", async () => {
  const up = startFakeUpstream({
    fallback: () => chatStream({ text: ["Hello", " world"], usage: { input: 5, output: 2 } }),
  });
  const collector = new Collector();
  await using gw = await startTestGateway({
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "gpt-stream" }] }],
  });
  try {
    await addTraces(gw, collector.url);
    const { data: stream, response } = await gw.openai().chat.completions.create({
      model: "smart",
      stream: true,
      messages: [{ role: "user", content: "hi" }],
    }, { headers: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` } }).withResponse();
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello world");
    const { request, hops } = await collector.trace(response.headers.get("x-request-id")!, 1);
    assert.equal(request.traceId, CLIENT_TRACE);
    assert.equal(request.parentSpanId, CLIENT_SPAN);
    assert.equal(request.attrs["pulsegate.stream"], true);
    assert.equal(request.attrs["pulsegate.client_format"], "openai-chat");
    assert.equal(request.attrs["gen_ai.usage.input_tokens"], 5);
    assert.equal(request.attrs["gen_ai.usage.output_tokens"], 2);
    assert.equal(request.attrs["gen_ai.response.model"], "gpt-stream");
    assert.deepEqual(request.events.map((e) => e.name), ["pulsegate.first_content"]);
    assert.deepEqual(request.status, { code: OK });
    const [hop] = hops as [Span];
    assert.equal(hop.parentSpanId, request.spanId);
    assert.equal(hop.attrs["gen_ai.provider.name"], "openai");
    assert.equal(hop.attrs["gen_ai.usage.output_tokens"], 2);
    assert.deepEqual(hop.status, { code: OK });
    assert.equal(upstreamTraceparent(up), `00-${CLIENT_TRACE}-${hop.spanId}-01`);
  } finally {
    await collector.close();
    await up.close();
  }
});

Deno.test("traces: with no traces destination, or an unsampled trace, the client's traceparent goes upstream unchanged and no span is sent", async () => {
  const up = startFakeUpstream({ fallback: () => chatWhole({ text: ["ok"] }) });
  const collector = new Collector();
  await using gw = await startTestGateway({
    upstreams: [{ id: "up1", kind: "openai-chat", base_url: up.url }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "m1" }] }],
  });
  const send = async (headers: Record<string, string>) => {
    const res = await postJson(
      `${gw.url}/v1/chat/completions`,
      { model: "smart", messages },
      headers,
    );
    assert.equal(res.status, 200);
    await res.body?.cancel();
    return res.headers.get("x-request-id")!;
  };
  try {
    const sampled = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
    await send({ traceparent: sampled, tracestate: "congo=t61rcWkgMzE" });
    assert.equal(upstreamTraceparent(up, 0), sampled);
    assert.equal(up.calls[0]!.headers.get("tracestate"), "congo=t61rcWkgMzE");
    await send({});
    assert.equal(upstreamTraceparent(up, 1), null, "no trace, none invented");

    // A disabled traces destination records nothing either.
    const off = await postJson(`${gw.url}/admin/api/destinations`, {
      id: "off",
      kind: "otlp-traces",
      url: collector.url,
      enabled: false,
    });
    assert.equal(off.status, 201);
    await off.body?.cancel();
    const quiet = await send({});
    assert.equal(upstreamTraceparent(up, 2), null);

    await addTraces(gw, collector.url);
    const unsampled = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-00`;
    const dropped = await send({ traceparent: unsampled });
    assert.equal(upstreamTraceparent(up, 3), unsampled);
    // Spans go out in order: once this one's arrived, the earlier ones would have too.
    const last = await send({});
    await collector.trace(last, 1);
    const ids = collector.spans.map((s) => s.attrs["pulsegate.request_id"]);
    assert.ok(!ids.includes(dropped), "an unsampled trace is not exported");
    assert.ok(!ids.includes(quiet), "a request started with tracing off is not exported");
  } finally {
    await collector.close();
    await up.close();
  }
});

Deno.test("traces: the destination is validated like the others", async () => {
  await using gw = await startTestGateway(undefined);
  const bad = await postJson(`${gw.url}/admin/api/destinations`, {
    kind: "otlp-traces",
    url: "ftp://collector/v1/traces",
  });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).problems[0].path, "url");
  const unknown = await postJson(`${gw.url}/admin/api/destinations`, {
    kind: "otlp-trace",
    url: "http://127.0.0.1:4318/v1/traces",
  });
  assert.equal(unknown.status, 400);
  assert.equal((await unknown.json()).problems[0].path, "kind");
});

Deno.test("traceparent parsing follows W3C Trace Context", () => {
  assert.deepEqual(parseTraceparent(`00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`), {
    traceId: CLIENT_TRACE,
    parentSpanId: CLIENT_SPAN,
    flags: 1,
  });
  // A later version may append fields; its first four are read.
  assert.deepEqual(parseTraceparent(`cc-${CLIENT_TRACE}-${CLIENT_SPAN}-03-what-next`), {
    traceId: CLIENT_TRACE,
    parentSpanId: CLIENT_SPAN,
    flags: 3,
  });
  for (const bad of BAD_TRACEPARENTS) assert.equal(parseTraceparent(bad), null, bad);
  assert.equal(parseTraceparent(null), null);
});

Deno.test("new trace and span ids are valid W3C ids and never repeat, across refills of the random pool", () => {
  const seen = new Set<string>();
  // Well past one 4 KiB draw of random bytes (24 bytes a request, 8 a span).
  for (let i = 0; i < 1_000; i++) {
    const trace = incomingTrace(new Headers(), { recording: false });
    const span = newSpanId();
    assert.match(trace.traceId, /^[0-9a-f]{32}$/);
    assert.match(trace.spanId, /^[0-9a-f]{16}$/);
    assert.match(span, /^[0-9a-f]{16}$/);
    for (const id of [trace.traceId, trace.spanId, span]) {
      assert.ok(!seen.has(id), `id ${id} repeated`);
      seen.add(id);
    }
    assert.notEqual(parseTraceparent(`00-${trace.traceId}-${span}-01`), null);
  }
});

Deno.test("attempt outcomes map to span statuses: hedge lost is unset, every failure is ERROR", () => {
  const request: RequestRecord = {
    id: "r1",
    instanceId: "i",
    state: "closed",
    startedAt: 1_000,
    endedAt: 1_500,
    clientFormat: "openai-chat",
    route: "smart",
    stream: true,
    keyId: "team-a",
    sessionId: null,
    status: 200,
    outcome: "success",
    failureSource: null,
    errorCode: null,
    errorMessage: null,
    upstream: "b",
    upstreamModel: "mb",
    firstContentMs: 200,
    durationMs: 500,
    inputTokens: null,
    outputTokens: null,
    cachedTokens: null,
    reasoningTokens: null,
    tokensEstimated: false,
    usageSource: null,
    costUsd: null,
    cacheWriteTokens: null,
    cacheWrite1hTokens: null,
    cacheWriteUsd: null,
    movedFrom: null,
    toolServer: null,
    bytesIn: null,
    bytesOut: null,
    trace: {
      traceId: CLIENT_TRACE,
      spanId: "1111111111111111",
      parentSpanId: null,
      flags: 1,
      traceState: null,
      recorded: true,
    },
  };
  const hop = (n: number, outcome: AttemptOutcome | null, durationMs: number | null) => ({
    requestId: "r1",
    hop: n,
    upstream: n === 1 ? "a" : "b",
    model: "m",
    outcome,
    status: null,
    errorCode: outcome === "idle_timeout" ? "gw.upstream.idle_timeout" : null,
    errorMessage: null,
    startedAt: 1_100,
    headersMs: null,
    firstContentMs: null,
    durationMs,
    inputTokens: null,
    outputTokens: null,
    tokensEstimated: false,
    usageSource: null,
    droppedHeaders: null,
    costUsd: outcome === "resumed" ? 0.0125 : null,
    resumeOffset: outcome === "resumed" ? 12 : null,
    cachedTokens: null,
    cacheWriteTokens: null,
    cacheWrite1hTokens: null,
    cacheWriteUsd: null,
    movedFrom: null,
    trace: { spanId: `${n}`.repeat(16) },
  });
  const body = otlpTraces([{
    request,
    attempts: [
      hop(2, "hedge_lost", 50),
      hop(3, "idle_timeout", 300),
      hop(4, "client_disconnected", 10),
      hop(5, "success", 390),
      hop(6, null, null),
      hop(7, "resumed", 20),
    ],
  }]) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }> };
  const spans = body.resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => ({
    ...s,
    attrs: flatten(s.attributes as RawAttr[]),
  })) as Span[];
  assert.deepEqual(spans.map((s) => s.status.code), [OK, 0, ERROR, ERROR, OK, 0, OK]);
  assert.equal(spans[2]!.attrs["error.type"], "gw.upstream.idle_timeout");
  assert.equal(spans[3]!.attrs["error.type"], "_OTHER");
  assert.equal(spans[0]!.startTimeUnixNano, "1000000000");
  assert.equal(spans[0]!.endTimeUnixNano, "1500000000");
  assert.equal(spans[1]!.endTimeUnixNano, "1150000000");
  assert.equal(spans[5]!.endTimeUnixNano, "1500000000", "an unfinished hop ends with its request");
  assert.equal(spans[0]!.attrs["pulsegate.key_id"], "team-a");
  assert.equal(spans[6]!.attrs["pulsegate.resume_offset"], 12);
  assert.equal(spans[6]!.attrs["pulsegate.cost_usd"], 0.0125);
  assert.equal(spans[5]!.attrs["pulsegate.cost_usd"], undefined, "no price, no cost");
  // A request without a trace context (never traced) makes no spans.
  const untraced = otlpTraces([{ request: { ...request, trace: undefined }, attempts: [] }]) as {
    resourceSpans: Array<{ scopeSpans: Array<{ spans: unknown[] }> }>;
  };
  assert.equal(untraced.resourceSpans[0]!.scopeSpans[0]!.spans.length, 0);

  // A tool call through /mcp is a GenAI tool span, its hops too; no model is named.
  const toolBody = otlpTraces([{
    request: {
      ...request,
      clientFormat: "mcp",
      route: "search__lookup",
      upstream: "search#1",
      upstreamModel: "lookup",
      toolServer: "search",
    },
    attempts: [{ ...hop(1, "success", 100), upstream: "search#1", model: "lookup" }],
  }]) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }> };
  const toolSpans = toolBody.resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => ({
    ...s,
    attrs: flatten(s.attributes as RawAttr[]),
  })) as Span[];
  assert.deepEqual(toolSpans.map((s) => s.name), [
    "execute_tool search__lookup",
    "execute_tool lookup",
  ]);
  assert.deepEqual(toolSpans.map((s) => s.attrs["gen_ai.operation.name"]), [
    "execute_tool",
    "execute_tool",
  ]);
  assert.deepEqual(toolSpans.map((s) => s.attrs["gen_ai.tool.name"]), ["search__lookup", "lookup"]);
  assert.deepEqual(toolSpans.map((s) => s.attrs["gen_ai.request.model"]), [undefined, undefined]);
  assert.equal(toolSpans[0]!.attrs["pulsegate.tool_server"], "search");
});
