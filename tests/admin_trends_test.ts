import assert from "node:assert/strict";
import type { TrendsView } from "../admin/trends_types.ts";
import { upsertAttempts, upsertRequests } from "../db/history_rows.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { trendStatements } from "../db/trend_queries.ts";
import { ADMIN, adminFetch } from "./admin_helpers.ts";
import { attemptRecord, requestRecord } from "./db_helpers.ts";
import { chatRoute, type TestGateway, withGateway } from "./harness.ts";

const BUCKET = 30_000;

/** Requests in two buckets of the 15-minute window and one just before it. */
function history(from: number): { requests: RequestRecord[]; attempts: AttemptRecord[] } {
  const at = (bucket: number, ms = 1_000) => from + bucket * BUCKET + ms;
  const done = (id: string, o: Partial<RequestRecord>) =>
    requestRecord({ id, state: "closed", route: "smart", startedAt: at(10), ...o });
  const requests = [
    done("a", { outcome: "success", upstream: "up2", firstContentMs: 100, outputTokens: 50 }),
    done("b", { outcome: "success", upstream: "up1", firstContentMs: 300, outputTokens: 30 }),
    done("c", { outcome: "error", upstream: "up1", errorCode: "gw.upstream.error" }),
    done("d", { outcome: "error", errorCode: "gw.request.aborted", firstContentMs: 200 }),
    done("e", { outcome: "error", errorCode: "gw.client.disconnected", route: "other" }),
    done("f", { outcome: "success", upstream: "up2", route: "other", startedAt: at(20) }),
    done("g", { outcome: "success", startedAt: from - 1 }),
  ];
  const hop = (requestId: string, hop: number, o: Partial<AttemptRecord>) =>
    attemptRecord({ requestId, hop, startedAt: at(10, 1_000 + hop), ...o });
  const attempts = [
    hop("a", 1, { upstream: "up1", outcome: "idle_timeout" }),
    hop("a", 2, { upstream: "up2", outcome: "success" }),
    hop("b", 1, { upstream: "up1", outcome: "success" }),
    // A retry on the same upstream is not a failover.
    hop("c", 1, { upstream: "up1", outcome: "error" }),
    hop("c", 2, { upstream: "up1", outcome: "error" }),
  ];
  return { requests, attempts };
}

async function trends(gw: TestGateway, query: string): Promise<TrendsView> {
  const res = await adminFetch(gw, `/admin/api/trends?${query}`);
  assert.equal(res.status, 200);
  return await res.json();
}

function withHistory(run: (gw: TestGateway, from: number) => Promise<void>): Promise<void> {
  return withGateway(async (gw) => {
    // The window moves at each bucket boundary: start at least 5 s before the next one, so every
    // read of a test sees the window the history was written for.
    const toBoundary = BUCKET - Date.now() % BUCKET;
    if (toBoundary < 5_000) await new Promise((r) => setTimeout(r, toBoundary + 50));
    const first = await trends(gw, "window=15m");
    const { requests, attempts } = history(first.from);
    await gw.db.client.batch([...upsertRequests(requests), ...upsertAttempts(attempts)], "write");
    await run(gw, first.from);
  }, {
    upstreams: 2,
    config: (urls) => chatRoute(urls),
    env: { PULSEGATE_ADMIN_TOKEN: ADMIN },
  });
}

Deno.test("trends: history bucketed by start over the window, with outcomes, percentiles and hops", async () => {
  await withHistory(async (gw, from) => {
    const view = await trends(gw, "window=15m");
    assert.equal(view.from, from);
    assert.equal(view.to - view.from, 15 * 60_000);
    assert.equal(view.bucketMs, BUCKET);
    assert.equal(view.buckets.length, 30);
    assert.equal(view.from % BUCKET, 0, "buckets are aligned to their size");
    assert.ok(view.to > Date.now() - BUCKET && view.to <= Date.now() + BUCKET);
    assert.deepEqual(view.choices, {
      routes: ["smart"],
      upstreams: ["up1", "up2"],
      windows: ["15m", "1h", "24h"],
    });
    assert.deepEqual(view.buckets[10], {
      at: from + 10 * BUCKET,
      success: 2,
      error: 1,
      aborted: 1,
      clientDisconnected: 1,
      // Nearest rank over 100, 200, 300 ms.
      firstContentP50Ms: 200,
      firstContentP95Ms: 300,
      idleTimeouts: 1,
      failovers: 1,
      outputTokens: 80,
    });
    assert.equal(view.buckets[20]!.success, 1);
    const total = view.buckets.reduce((n, b) => n + b.success, 0);
    assert.equal(total, 3, "the request before the window is left out");
    assert.equal(view.buckets[0]!.firstContentP50Ms, null);

    const hour = await trends(gw, "window=1h");
    assert.equal(hour.buckets.length, 60);
    assert.equal(hour.buckets.reduce((n, b) => n + b.success, 0), 4);
    assert.equal((await trends(gw, "window=24h")).buckets.length, 96);
  });
});

Deno.test("trends: route and upstream filters; a bad window is refused", async () => {
  await withHistory(async (gw) => {
    const other = await trends(gw, "window=15m&route=other");
    assert.equal(other.route, "other");
    assert.deepEqual(
      other.buckets.filter((b) => b.success + b.clientDisconnected > 0).map((b) => [
        b.success,
        b.clientDisconnected,
      ]),
      [[0, 1], [1, 0]],
    );
    // Requests whose last upstream was up1; hops on up1 (its idle timeout and the failover away).
    const up1 = (await trends(gw, "upstream=up1")).buckets[10]!;
    assert.deepEqual(
      [up1.success, up1.error, up1.idleTimeouts, up1.failovers],
      [1, 1, 1, 1],
    );
    const up2 = (await trends(gw, "upstream=up2")).buckets[10]!;
    assert.deepEqual([up2.success, up2.idleTimeouts, up2.failovers], [1, 0, 0]);
    const bad = await adminFetch(gw, "/admin/api/trends?window=2d");
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, "admin.bad_query");
    assert.equal((await adminFetch(gw, "/admin/api/trends", { token: null })).status, 401);
  });
});

Deno.test("trends: both queries read requests along a started_at index", async () => {
  await withGateway(async (gw) => {
    for (const filter of [{}, { route: "smart" }, { upstream: "up1" }]) {
      const statements = trendStatements({ from: 0, bucketMs: BUCKET, buckets: 30, ...filter });
      for (const statement of [statements.requests, statements.hops]) {
        const s = statement as { sql: string; args: unknown[] };
        const plan = await gw.db.client.execute({
          sql: `EXPLAIN QUERY PLAN ${s.sql}`,
          args: s.args as never,
        });
        const steps = plan.rows.map((r) => String(r.detail));
        const where = `${JSON.stringify(filter)}: ${steps.join(" | ")}`;
        // No table is walked whole; the first table read is a range on a started_at index.
        assert.ok(!steps.some((d) => /^SCAN (requests|attempts|r|a|n)\b/.test(d)), where);
        const first = steps.find((d) => /^SEARCH (requests|attempts|r|a)\b/.test(d)) ?? "";
        assert.match(first, /USING (COVERING )?INDEX \w+started \(.*started_at>\?/, where);
      }
    }
  }, { config: (urls) => chatRoute(urls) });
});
