import assert from "node:assert/strict";
import {
  countRequests,
  getRequest,
  type HistoryOutcome,
  listAttemptsFor,
  listRequests,
  type ListRequestsOptions,
  listRequestsStatement,
} from "./history_queries.ts";
import { HistoryWriter } from "./history_writer.ts";
import type { AttemptRecord, RequestRecord } from "./records.ts";
import { attemptRecord, manualTimers, requestRecord, withTempDb } from "../tests/db_helpers.ts";

const ROUTES = ["smart", "fast"] as const;
const UPSTREAMS = ["claude", "openai", "gemini"] as const;

/** 30 requests; every third pair shares a start time so paging must tie-break on id. */
function sampleRequests(): RequestRecord[] {
  return Array.from({ length: 30 }, (_, i) =>
    requestRecord({
      id: `r${String(i).padStart(2, "0")}`,
      state: "closed",
      startedAt: 1_000 + Math.floor(i / 2) * 10,
      route: ROUTES[i % 2] ?? null,
      upstream: UPSTREAMS[i % 3] ?? null,
      outcome: i % 5 === 0 ? "error" : "success",
      sessionId: i < 4 ? "s-1" : null,
    }));
}

async function seeded(fn: Parameters<typeof withTempDb>[0]): Promise<void> {
  await withTempDb(async (temp) => {
    const writer = new HistoryWriter(temp.db, manualTimers);
    for (const record of sampleRequests()) writer.writeRequest(record);
    writer.writeAttempt(attemptRecord({ requestId: "r01", hop: 2, upstream: "openai" }));
    writer.writeAttempt(attemptRecord({ requestId: "r01", hop: 1 }));
    writer.writeAttempt(attemptRecord({ requestId: "r02" }));
    assert.equal(await writer.close(), true);
    await fn(temp);
  });
}

function expected(filter: (r: RequestRecord) => boolean): string[] {
  return sampleRequests()
    .filter(filter)
    .sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : -1))
    .map((r) => r.id);
}

async function pageThrough(
  db: Parameters<typeof listRequests>[0],
  opts: ListRequestsOptions,
): Promise<string[]> {
  const seen: string[] = [];
  let before: ListRequestsOptions["before"];
  for (;;) {
    const page = await listRequests(db, { ...opts, before });
    seen.push(...page.map((r) => r.id));
    const last = page.at(-1);
    if (last === undefined || page.length < (opts.limit ?? 50)) return seen;
    before = { startedAt: last.startedAt, id: last.id };
  }
}

Deno.test("listRequests pages newest first without gaps or repeats", async () => {
  await seeded(async ({ db }) => {
    assert.deepEqual(await pageThrough(db, { limit: 4 }), expected(() => true));
  });
});

Deno.test("listRequests filters combine with paging", async () => {
  await seeded(async ({ db }) => {
    assert.deepEqual(
      await pageThrough(db, { limit: 3, route: "smart" }),
      expected((r) => r.route === "smart"),
    );
    assert.deepEqual(
      await pageThrough(db, { limit: 3, upstream: "gemini", outcome: "success" }),
      expected((r) => r.upstream === "gemini" && r.outcome === "success"),
    );
    assert.deepEqual(
      await pageThrough(db, { limit: 3, sessionId: "s-1" }),
      expected((r) => r.sessionId === "s-1"),
    );
    assert.deepEqual(
      await pageThrough(db, { limit: 5, since: 1_050, until: 1_100 }),
      expected((r) => r.startedAt >= 1_050 && r.startedAt < 1_100),
    );
  });
});

Deno.test("getRequest and countRequests", async () => {
  await seeded(async ({ db }) => {
    assert.equal(await getRequest(db, "missing"), null);
    const row = await getRequest(db, "r03");
    assert.deepEqual(row, sampleRequests()[3]);
    assert.equal(await countRequests(db), 30);
    assert.equal(await countRequests(db, { outcome: "error" }), 6);
  });
});

Deno.test("listAttemptsFor returns each chain in hop order", async () => {
  await seeded(async ({ db }) => {
    const chains = await listAttemptsFor(db, ["r01", "r02", "r03"]);
    assert.deepEqual(chains.get("r01")?.map((a) => a.hop), [1, 2]);
    assert.equal(chains.get("r02")?.length, 1);
    assert.deepEqual(chains.get("r03"), []);
    assert.equal((await listAttemptsFor(db, [])).size, 0);
  });
});

Deno.test("history pages are index range scans, never a sort of the whole table", async () => {
  await seeded(async ({ db }) => {
    const cases: ListRequestsOptions[] = [
      {},
      { before: { startedAt: 1_050, id: "r10" } },
      { route: "smart", before: { startedAt: 1_050, id: "r10" } },
      { upstream: "claude" },
      { outcome: "error" },
      { sessionId: "s-1" },
    ];
    for (const opts of cases) {
      const { sql, args } = (() => {
        const statement = listRequestsStatement(opts);
        return typeof statement === "string" ? { sql: statement, args: [] } : statement;
      })();
      const plan = await db.client.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, args });
      const detail = plan.rows.map((row) => String(row.detail)).join(" | ");
      assert.match(detail, /USING (COVERING )?INDEX/, JSON.stringify(opts));
      assert.doesNotMatch(detail, /TEMP B-TREE/, `${JSON.stringify(opts)}: ${detail}`);
    }
  });
});

Deno.test("the state filter finds live rows through the partial index", async () => {
  await seeded(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord({ id: "live", startedAt: 5_000 }));
    assert.equal(await writer.close(), true);
    assert.deepEqual((await listRequests(db, { state: "open" })).map((r) => r.id), ["live"]);
    assert.equal(await countRequests(db, { state: "open" }), 1);
    assert.equal(await countRequests(db, { state: "closed" }), 30);
  });
});

Deno.test("history outcome filters: the request's result, or what happened on its hops", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    const closed = (id: string, fields: Partial<RequestRecord>) =>
      writer.writeRequest(requestRecord({ id, state: "closed", outcome: "success", ...fields }));
    const hop = (requestId: string, hop: number, fields: Partial<AttemptRecord>) =>
      writer.writeAttempt(attemptRecord({ requestId, hop, outcome: "success", ...fields }));
    closed("plain", {});
    hop("plain", 1, {});
    closed("retried", {});
    hop("retried", 1, { outcome: "error", errorCode: "gw.upstream.error" });
    hop("retried", 2, {});
    closed("over", {});
    hop("over", 1, { outcome: "idle_timeout", errorCode: "gw.upstream.idle_timeout" });
    hop("over", 2, { upstream: "openai" });
    closed("cut", { outcome: "error", errorCode: "gw.upstream.idle_timeout_mid_stream" });
    hop("cut", 1, { outcome: "idle_timeout", errorCode: "gw.upstream.idle_timeout_mid_stream" });
    closed("stopped", { outcome: "error", errorCode: "gw.request.aborted" });
    closed("left", { outcome: "error", errorCode: "gw.client.disconnected" });
    closed("hedge", {});
    hop("hedge", 1, { outcome: "hedge_lost" as AttemptRecord["outcome"] });
    hop("hedge", 2, { upstream: "openai" });
    closed("resume", {});
    hop("resume", 1, { outcome: "idle_timeout", errorCode: "gw.upstream.idle_timeout_mid_stream" });
    hop("resume", 2, { upstream: "openai", outcome: "resumed" as AttemptRecord["outcome"] });
    assert.equal(await writer.close(), true);
    const ids = async (outcome: HistoryOutcome) =>
      (await listRequests(db, { outcome })).map((r) => r.id).sort();
    assert.deepEqual(await ids("success"), ["hedge", "over", "plain", "resume", "retried"]);
    assert.deepEqual(await ids("error"), ["cut", "left", "stopped"]);
    assert.deepEqual(await ids("aborted"), ["stopped"]);
    assert.deepEqual(await ids("client_disconnected"), ["left"]);
    assert.deepEqual(await ids("idle_timeout"), ["over"]);
    assert.deepEqual(await ids("idle_timeout_mid_stream"), ["cut", "resume"]);
    // A retry on the same upstream is not a failover.
    assert.deepEqual(await ids("failed_over"), ["hedge", "over", "resume"]);
    assert.deepEqual(await ids("hedged"), ["hedge"]);
    assert.deepEqual(await ids("resumed"), ["resume"]);
  });
});
