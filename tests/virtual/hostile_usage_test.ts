import assert from "node:assert/strict";
import type { ConfigInput } from "../../gateway/config/schema.ts";
import type { RequestRecord } from "../../db/records.ts";
import { MAX_TOKEN_COUNT } from "../../gateway/formats/token_counts.ts";
import { chatStreamBlocks, chatWholeBody } from "../fake_upstreams/openai_chat_script.ts";
import { type Script, sseSteps } from "../fake_upstreams/server.ts";
import { startVirtualGateway, type VirtualGateway } from "../virtual_gateway.ts";

/**
 * docs/security.md "Numbers an upstream reports": every token count an upstream reports is taken
 * only as a whole number from 0 to MAX_TOKEN_COUNT. The cases are generated from two tables, the
 * hostile numbers and the fields they stand in, each sent in a streamed and a whole answer, to a
 * whole gateway in virtual time (tests/virtual_gateway.ts).
 */

/** JSON number literals no honest upstream sends: Infinity once parsed, a credit, a fraction. */
const HOSTILE_NUMBERS = ["1e400", "-1e9", "2.5", "9007199254740991", "1e308"];

/** Where each hostile number stands, by the marker the fake's body carries there. */
const FIELDS = [
  { wire: "prompt_tokens", ir: "inputTokens", marker: 777_001 },
  { wire: "completion_tokens", ir: "outputTokens", marker: 777_002 },
  { wire: "cached_tokens", ir: "cachedTokens", marker: 777_003 },
] as const;

/** What the fake reports where no hostile number stands. */
const SANE: Record<number, string> = { 777_001: "50", 777_002: "7", 777_003: "10" };

const USAGE = { input: 777_001, output: 777_002, cached: 777_003 };

/** Prices high enough that one request's estimated tokens pass a 0.001 USD budget. */
const PRICE = { input: 1_000, output: 2_000 };

function config(url: string): ConfigInput {
  return {
    upstreams: [{
      id: "up1",
      kind: "openai-chat",
      base_url: url,
      prices: { "model-1": PRICE },
    }],
    routes: [{ model: "smart", candidates: [{ upstream: "up1", model: "model-1" }] }],
    keys: [
      { id: "free", key_env: "KEY_FREE" },
      { id: "tight", key_env: "KEY_TIGHT", budget: { usd: 0.001, period: "day" } },
      { id: "credit", key_env: "KEY_CREDIT", budget: { usd: 0.001, period: "day" } },
      { id: "other", key_env: "KEY_OTHER", rpm: 1_000 },
    ],
  };
}

const ENV = {
  KEY_FREE: "sk-free",
  KEY_TIGHT: "sk-tight",
  KEY_CREDIT: "sk-credit",
  KEY_OTHER: "sk-other",
};

/** The fake's answer with each field's marker replaced: `hostile` maps marker to literal. */
function answer(opts: { stream: boolean; hostile: Record<number, string> }): Script {
  const fill = (text: string) =>
    text.replace(/77700[123]/g, (m) => opts.hostile[Number(m)] ?? SANE[Number(m)]!);
  const ans = { text: ["hello ", "there"], usage: USAGE };
  if (!opts.stream) return { body: [{ send: fill(chatWholeBody(ans)) }] };
  return {
    headers: { "content-type": "text/event-stream" },
    body: sseSteps(chatStreamBlocks(ans).map(fill)),
  };
}

/** `{"hostile": {...}}` in the user's message says what the fake reports. */
function ask(opts: { stream: boolean; hostile: Record<number, string> }) {
  return {
    model: "smart",
    stream: opts.stream,
    messages: [{ role: "user", content: JSON.stringify({ hostile: opts.hostile }) }],
  };
}

/** `run` in virtual time, on a gateway over a fake that reports what each request asks. */
async function withHostileUpstream(run: (v: VirtualGateway) => Promise<void>): Promise<void> {
  await using v = await startVirtualGateway({ config: ([url]) => config(url!), env: ENV });
  v.ups[0]!.setHandler((call) => {
    const body = call.json as { stream?: boolean; messages: { content: string }[] };
    const { hostile } = JSON.parse(body.messages[0]!.content);
    return answer({ stream: body.stream === true, hostile });
  });
  await v.run(run(v));
}

async function send(
  v: VirtualGateway,
  opts: { stream: boolean; hostile: Record<number, string>; key: string },
): Promise<{ status: number; id: string; body: string }> {
  const res = await v.exchange("/v1/chat/completions", ask(opts), {
    headers: { authorization: `Bearer ${opts.key}` },
  });
  return { status: res.status, id: res.headers.get("x-request-id") ?? "", body: res.text };
}

const metricsOf = async (v: VirtualGateway) =>
  (await v.exchange("/metrics", undefined, { method: "GET" })).text;

function assertCount(value: number | null, what: string): void {
  if (value === null) return;
  assert.ok(
    Number.isInteger(value) && value >= 0 && value <= MAX_TOKEN_COUNT,
    `${what}: ${value}`,
  );
}

function assertBillable(row: RequestRecord, what: string): void {
  for (const field of ["inputTokens", "outputTokens", "cachedTokens", "reasoningTokens"] as const) {
    assertCount(row[field], `${what} ${field}`);
  }
  assert.ok(row.costUsd !== null && Number.isFinite(row.costUsd) && row.costUsd >= 0, what);
  assert.ok((row.cachedTokens ?? 0) <= (row.inputTokens ?? 0), `${what} cached within input`);
}

/** Every sample of the token and cost counters is a finite number, 0 or more. */
function assertCountersSane(metrics: string): void {
  const counters = /^pulsegate_(tokens_total|cost_total|cache_tokens_total)\{/;
  for (const line of metrics.split("\n").filter((l) => counters.test(l))) {
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    assert.ok(Number.isFinite(value) && value >= 0, line);
  }
}

Deno.test("hostile usage: each out-of-range count in each field is refused, estimated and counted, stream and whole", async () => {
  await withHostileUpstream(async (v) => {
    const cases = HOSTILE_NUMBERS.flatMap((literal) =>
      FIELDS.flatMap((field) => [true, false].map((stream) => ({ literal, field, stream })))
    );
    const sent = await Promise.all(
      cases.map((c) =>
        send(v, { stream: c.stream, hostile: { [c.field.marker]: c.literal }, key: "sk-free" })
      ),
    );
    for (const [i, c] of cases.entries()) {
      const what = `${c.field.wire}=${c.literal} ${c.stream ? "stream" : "whole"}`;
      const { status, id, body } = sent[i]!;
      assert.equal(status, 200, `${what}: ${body}`);
      assert.match(body, /hello/, what);
      const { request, attempts } = await v.rowIn(id);
      assert.equal(request.usageSource, "rejected", what);
      assert.equal(attempts[0]?.usageSource, "rejected", what);
      assertBillable(request, what);
      // A refused input or output count is the gateway's estimate, never left at nothing.
      if (c.field.ir !== "cachedTokens") {
        assert.ok((request[c.field.ir] ?? 0) > 0, `${what}: estimated ${request[c.field.ir]}`);
        assert.equal(request.tokensEstimated, true, what);
      }
    }
    const metrics = await metricsOf(v);
    for (const field of FIELDS) {
      const line = `pulsegate_usage_rejected_total{upstream="up1",field="${field.ir}"} ` +
        `${HOSTILE_NUMBERS.length * 2}`;
      assert.ok(metrics.includes(line), `${line}\n${metrics}`);
    }
    assertCountersSane(metrics);
  });
});

Deno.test("hostile usage: a cache count above the input is cut to it, and the row stays the upstream's", async () => {
  await withHostileUpstream(async (v) => {
    for (const stream of [true, false]) {
      const sent = await send(v, { stream, hostile: { 777_003: "1000000" }, key: "sk-free" });
      assert.equal(sent.status, 200, sent.body);
      const { request, attempts } = await v.rowIn(sent.id);
      assert.equal(request.cachedTokens, 50);
      assert.equal(attempts[0]?.cachedTokens, 50);
      assert.equal(request.usageSource, "upstream");
      assert.equal(request.costUsd, (50 * PRICE.input + 7 * PRICE.output) / 1e6);
    }
    const metrics = await metricsOf(v);
    assert.doesNotMatch(metrics, /pulsegate_usage_rejected_total\{/);
  });
});

Deno.test("hostile usage: an Infinity or a credit never lifts a key's budget, and other keys' usage is still written", async () => {
  await withHostileUpstream(async (v) => {
    const cases: { key: string; id: string; hostile: Record<number, string> }[] = [
      { key: "sk-tight", id: "tight", hostile: { 777_001: "1e400", 777_003: "1e400" } },
      { key: "sk-credit", id: "credit", hostile: { 777_002: "-1e9" } },
    ];
    for (const c of cases) {
      const first = await send(v, { stream: false, hostile: c.hostile, key: c.key });
      assert.equal(first.status, 200, first.body);
      const { request } = await v.rowIn(first.id);
      assertBillable(request, c.id);
      // The estimate is priced: more than the 0.001 USD budget, so the next one is refused.
      assert.ok(request.costUsd! > 0.001, `${c.id} cost ${request.costUsd}`);
      const next = await send(v, { stream: false, hostile: {}, key: c.key });
      assert.equal(next.status, 429, `${c.id}: ${next.body}`);
      assert.match(next.body, /gw\.key\.budget_exhausted/);
    }
    const other = await send(v, { stream: true, hostile: {}, key: "sk-other" });
    assert.equal(other.status, 200, other.body);
    // Every key's counters reach the shared table, finite: one bad answer blocks none of them.
    const dayRows = async () =>
      (await v.gw.db.client.execute(
        "SELECT key_id, cost_usd FROM key_usage WHERE kind = 'day' ORDER BY key_id",
      )).rows;
    // The meter writes each key's counters on its own beat: up to a minute for all three.
    const written = (rows: Awaited<ReturnType<typeof dayRows>>) =>
      rows.length === 3 && rows.every((r) => Number(r.cost_usd) > 0);
    for (let t = 0; t < 60_000 && !written(await dayRows()); t += 100) await v.clock.sleep(100);
    const rows = await dayRows();
    assert.deepEqual(rows.map((r) => String(r.key_id)), ["credit", "other", "tight"]);
    for (const r of rows) {
      assert.ok(Number.isFinite(Number(r.cost_usd)) && Number(r.cost_usd) > 0, String(r.key_id));
    }
    assertCountersSane(await metricsOf(v));
  });
});
