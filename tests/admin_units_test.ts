import {
  advance,
  ALL_LIVE,
  pageRange,
  stateTotals,
  tokensPerSecond,
  viewQuery,
} from "../admin/client/live_view.ts";
import type { LiveRow, LiveSnapshot } from "../admin/api_types.ts";
import assert from "node:assert/strict";
import { createSseParser, type SseEvent } from "../admin/client/sse_parser.ts";
import { formatMs, formatTokens } from "../admin/client/format.ts";
import { adminGuard } from "../admin/guard.ts";
import { Hono } from "hono";
import { percentile, summarise } from "../admin/health.ts";
import { HISTORY_MAX_PAGE, parseHistoryQuery } from "../admin/history_api.ts";
import { mergePatch } from "../admin/merge_patch.ts";

Deno.test("sse parser: events split across chunks and line endings, comments skipped", () => {
  const events: SseEvent[] = [];
  const feed = createSseParser((e) => events.push(e));
  const chunks = [
    ": live\n\nevent: snap",
    "shot\r",
    '\ndata: {"a":',
    "1}\n",
    "\n",
    // A \r that ends a chunk may be half of \r\n: the event waits for the next byte.
    "data: x\r\r",
    ": next\n",
  ];
  for (const chunk of chunks) feed(chunk);
  assert.deepEqual(events, [
    { event: "snapshot", data: '{"a":1}' },
    { event: "message", data: "x" },
  ]);
});

Deno.test("merge patch: objects merge, null deletes, arrays and scalars replace", () => {
  const base = { failover: { idle_timeout_secs: 30, pause_secs: 60 }, upstreams: [1, 2], keys: [] };
  const merged = mergePatch(base, {
    failover: { idle_timeout_secs: 60, pause_secs: null },
    upstreams: [3],
  });
  assert.deepEqual(merged, { failover: { idle_timeout_secs: 60 }, upstreams: [3], keys: [] });
  assert.deepEqual(base.failover, { idle_timeout_secs: 30, pause_secs: 60 }, "base untouched");
  const sneaky = mergePatch({}, JSON.parse('{"__proto__": {"polluted": true}}'));
  assert.equal(Object.getPrototypeOf(sneaky), Object.prototype);
  assert.deepEqual(Object.keys(sneaky as object), ["__proto__"], "kept as a key to be refused");
});

Deno.test("health summary: caller 4xx is not the upstream's failure; percentiles by rank", () => {
  const s = (outcome: "success" | "error" | "idle_timeout" | "aborted" | null, status = 200) => ({
    model: "m",
    outcome,
    status,
    firstContentMs: outcome === "success" ? 100 : null,
    durationMs: outcome === "success" ? 600 : 10,
    // 50 tokens in the 500 ms after the first content: 100 tokens/s.
    outputTokens: outcome === "success" ? 50 : null,
  });
  const summary = summarise([
    s("success"),
    s("success"),
    s("error", 500),
    s("error", 400),
    s("error", 401),
    s("error", 200), // an in-stream error after 200
    s("idle_timeout"),
    s("aborted"),
    s(null),
  ]);
  assert.equal(summary.attempts, 8, "attempts in progress are not counted");
  assert.equal(summary.successes, 2);
  assert.equal(summary.failures, 4);
  assert.equal(summary.idleTimeouts, 1);
  assert.equal(summary.cancelled, 1);
  assert.equal(summary.firstContentP50Ms, 100);
  assert.equal(summary.errorRate, 4 / 6, "failures over successes and failures");
  assert.equal(summary.tokensPerSecP50, 100);
  assert.equal(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.95), 10);
  assert.equal(percentile([1, 2, 3, 4], 0.5), 2);
  assert.equal(percentile([], 0.5), null);
});

Deno.test("history query: filters, bounds and the cursor pair", () => {
  const parsed = parseHistoryQuery(
    new URLSearchParams("route=smart&outcome=error&session=s&since=10&until=20&limit=9999"),
  );
  assert.ok(parsed.ok);
  assert.deepEqual(parsed.options, {
    route: "smart",
    upstream: undefined,
    sessionId: "s",
    outcome: "error",
    since: 10,
    until: 20,
    limit: HISTORY_MAX_PAGE,
  });
  const cursor = parseHistoryQuery(new URLSearchParams("before_at=5&before_id=a:b.c"));
  assert.ok(cursor.ok);
  assert.deepEqual(cursor.options.before, { startedAt: 5, id: "a:b.c" });
  assert.equal(parseHistoryQuery(new URLSearchParams("before_id=x")).ok, false);
  assert.equal(parseHistoryQuery(new URLSearchParams("limit=-1")).ok, false);
});

Deno.test("page formatting: durations and tokens", () => {
  assert.equal(formatMs(null), "—");
  assert.equal(formatMs(850), "850 ms");
  assert.equal(formatMs(12_340), "12.3 s");
  assert.equal(formatMs(125_000), "2 m 05 s");
  assert.equal(formatTokens(null, null), "—");
  assert.equal(formatTokens(12, null), "12 in / — out");
});

Deno.test("admin guard: with no token beyond loopback the API is closed, whatever is sent", async () => {
  const app = new Hono();
  app.use("*", adminGuard({ adminToken: undefined, loopback: false }));
  app.get("/x", (c) => c.text("in"));
  const tries: Record<string, string>[] = [{}, { authorization: "Bearer anything" }];
  for (const headers of tries) {
    const res = await app.request("/x", { headers });
    assert.equal(res.status, 401);
    const body = await res.json();
    assert.equal(body.error.code, "admin.closed");
    assert.match(body.error.message, /PULSEGATE_ADMIN_TOKEN/);
  }
});

Deno.test("live view: the gateway is asked the view and page; heartbeats move times on", () => {
  const row = (id: string, fields: Partial<LiveRow>): LiveRow => ({
    id,
    instance: "a1",
    sessionId: null,
    keyId: null,
    clientFormat: "openai-chat",
    route: "smart",
    stream: true,
    upstream: "up1",
    hop: 1,
    state: "streaming",
    startedAt: 1_000,
    elapsedMs: 5_000,
    idleMs: 100,
    firstContentMs: 1_000,
    inputTokens: null,
    outputTokens: null,
    aborting: false,
    ...fields,
  });
  assert.equal(viewQuery(ALL_LIVE, { after: null }), "");
  assert.equal(
    viewQuery({ ...ALL_LIVE, q: " stuck-1 ", sort: "idle", state: "holding" }, { after: "5.a1.x" }),
    "q=stuck-1&state=holding&sort=idle&after=5.a1.x",
  );
  const snapshot: LiveSnapshot = {
    at: 10_000,
    requests: [row("a", {}), row("b", { idleMs: null, elapsedMs: 400 })],
    totals: { running: 5_000, matching: 250, states: { streaming: 4_990, holding: 10 } },
    page: { sort: "oldest", offset: 100, limit: 100, next: "x" },
    instances: { total: 1, ids: ["a1"], silent: [] },
    choices: { routes: [], upstreams: [] },
  };
  const later = advance(snapshot, 10_500);
  assert.deepEqual(later.requests.map((r) => [r.elapsedMs, r.idleMs]), [[5_500, 600], [900, null]]);
  assert.equal(later.at, 10_500);
  assert.equal(pageRange(snapshot), "101–102 of 250");
  assert.deepEqual(stateTotals(snapshot.totals.states), [["holding", 10], ["streaming", 4_990]]);
  assert.equal(tokensPerSecond(row("d", { outputTokens: 40 })), 10, "40 tokens over 4 s");
  assert.equal(tokensPerSecond(row("e", {})), null, "no tokens yet");
});
