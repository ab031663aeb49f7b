import assert from "node:assert/strict";
import type { InStatement } from "@libsql/client";
import { RECENT_ATTEMPTS, recentAttempts } from "../db/admin_queries.ts";
import { type Db, openDatabase } from "../db/client.ts";
import { COST_GROUPS, costBounds, costTotals, totalsSql } from "../db/cost_queries.ts";
import {
  countRequests,
  HISTORY_OUTCOMES,
  listRequests,
  type ListRequestsOptions,
  listRequestsStatement,
} from "../db/history_queries.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import { rollupTrendStatement, trendBuckets, trendStatements } from "../db/trend_queries.ts";
import { attemptRecord, manualTimers, requestRecord, withTempDb } from "./db_helpers.ts";

/**
 * docs/design.md "History": every history write pays for every index, so `requests` has only
 * the indexes an admin query reads, two of them partial. Each query the admin runs is checked
 * here to read along its index, and the partial indexes to answer exactly what the full ones
 * did on a database they replaced them in.
 */

const ERROR_CODES = [null, "gw.request.aborted", "gw.client.disconnected", "gw.upstream.error"];

/** 60 requests over routes, upstreams, sessions and outcomes, with one or two hops each. */
async function seed(db: Db): Promise<void> {
  const writer = new HistoryWriter(db, manualTimers);
  for (let i = 0; i < 60; i++) {
    const id = `r${String(i).padStart(2, "0")}`;
    const failed = i % 4 !== 0;
    const code = failed ? ERROR_CODES[i % ERROR_CODES.length] ?? "gw.upstream.error" : null;
    writer.writeRequest(requestRecord({
      id,
      state: i === 59 ? "open" : "closed",
      startedAt: 10_000 + Math.floor(i / 3) * 1_000,
      route: i % 2 ? "smart" : "fast",
      upstream: i % 3 ? "claude" : "openai",
      sessionId: i % 5 === 0 ? `s-${i % 2}` : null,
      outcome: i === 59 ? null : failed ? "error" : "success",
      errorCode: code,
      firstContentMs: 100 + i,
      outputTokens: i,
      costUsd: i / 100,
      keyId: i % 2 ? "k1" : "k2",
    }));
    writer.writeAttempt(attemptRecord({
      requestId: id,
      hop: 1,
      upstream: i % 7 ? "claude" : "openai",
      startedAt: 10_000 + Math.floor(i / 3) * 1_000 + 5,
      outcome: i % 7 ? "success" : "idle_timeout",
      inputTokens: 10,
      outputTokens: i,
      costUsd: i / 200,
    }));
    if (i % 7 === 0) {
      writer.writeAttempt(attemptRecord({
        requestId: id,
        hop: 2,
        upstream: "claude",
        startedAt: 10_000 + Math.floor(i / 3) * 1_000 + 50,
        outcome: "success",
      }));
    }
  }
  assert.equal(await writer.close(), true);
}

const PAGES: [ListRequestsOptions, RegExp][] = [
  [{}, /requests_started\b/],
  [{ before: { startedAt: 20_000, id: "r31" } }, /requests_started\b/],
  [{ since: 12_000, until: 18_000 }, /requests_started\b/],
  [{ route: "smart" }, /requests_route_started/],
  [{ upstream: "claude" }, /requests_upstream_started/],
  [{ sessionId: "s-1" }, /requests_session\b/],
  [{ outcome: "success" }, /requests_started\b/],
  [{ outcome: "error" }, /requests_errors/],
  [{ outcome: "aborted" }, /requests_errors/],
  [{ outcome: "client_disconnected" }, /requests_errors/],
];
// Live rows: the partial index holds only them, a handful, so they are sorted, not ranged.
const LIVE: [ListRequestsOptions, RegExp] = [{ state: "open" }, /requests_open/];

async function planOf(db: Db, statement: InStatement): Promise<string> {
  const { sql, args } = typeof statement === "string" ? { sql: statement, args: [] } : statement;
  const plan = await db.client.execute({ sql: `EXPLAIN QUERY PLAN ${sql}`, args });
  return plan.rows.map((row) => String(row.detail)).join(" | ");
}

/** A table walked whole, rather than a range of one of its indexes. */
const WHOLE_TABLE = /\bSCAN (requests|attempts|r|a|n)\b(?! USING)/;

Deno.test("every history page is read along its own index, with no sort step", async () => {
  await withTempDb(async ({ db }) => {
    await seed(db);
    for (const [opts, index] of [...PAGES, LIVE]) {
      const plan = await planOf(db, listRequestsStatement(opts));
      const where = `${JSON.stringify(opts)}: ${plan}`;
      assert.match(plan, index, where);
      if (opts.state === undefined) assert.doesNotMatch(plan, /TEMP B-TREE/, where);
      assert.doesNotMatch(plan, WHOLE_TABLE, where);
    }
  });
});

Deno.test("cost totals, trends and upstream health read a range of a started_at index", async () => {
  await withTempDb(async ({ db }) => {
    await seed(db);
    const statements: [string, InStatement][] = [
      ...COST_GROUPS.map((by): [string, InStatement] => [
        `costs by ${by}`,
        // Part minutes at both ends: every part of the statement is read.
        { sql: totalsSql(by), args: costBounds(1_000, 1e15 + 1_000) },
      ]),
      ["recent attempts", { sql: RECENT_ATTEMPTS, args: ["claude", 0, 100] }],
    ];
    for (const filter of [{}, { route: "smart" }, { upstream: "claude" }]) {
      const trend = trendStatements({ from: 0, bucketMs: 1_000, buckets: 30, ...filter });
      statements.push([`trend requests ${JSON.stringify(filter)}`, trend.requests]);
      statements.push([`trend hops ${JSON.stringify(filter)}`, trend.hops]);
    }
    for (const [name, statement] of statements) {
      const plan = await planOf(db, statement);
      if (Deno.env.get("SHOW_PLANS")) console.log(name, plan);
      assert.doesNotMatch(plan, WHOLE_TABLE, `${name}: ${plan}`);
      assert.match(
        plan,
        /USING (COVERING )?INDEX \w*started\w* \(.*started_at[><]/,
        `${name}: ${plan}`,
      );
      if (name.startsWith("costs")) assert.match(plan, ROLLUP_RANGE, `${name}: ${plan}`);
    }
  });
});

/** A range of one bucket size of a rollup table, along its key. */
const ROLLUP_RANGE =
  /SEARCH \w+ USING PRIMARY KEY \(bucket_ms=\? AND bucket_start>\? AND bucket_start<\?\)/;

Deno.test("trends of whole-minute buckets read a range of the rollups", async () => {
  await withTempDb(async ({ db }) => {
    await seed(db);
    for (const filter of [{}, { route: "smart" }, { upstream: "claude" }]) {
      const q = { from: 0, bucketMs: 900_000, buckets: 96, size: 900_000, ...filter };
      const plan = await planOf(db, rollupTrendStatement(q));
      assert.match(plan, ROLLUP_RANGE, `${JSON.stringify(filter)}: ${plan}`);
      assert.doesNotMatch(plan, /\b(requests|attempts)\b/, plan);
    }
  });
});

/** What every admin query answers, to compare a database before and after a migration. */
async function answers(db: Db): Promise<unknown> {
  const pages: Record<string, unknown> = {};
  for (const [opts] of [...PAGES, LIVE]) {
    pages[JSON.stringify(opts)] = {
      ids: (await listRequests(db, opts)).map((r) => r.id),
      count: await countRequests(db, opts),
    };
  }
  for (const outcome of HISTORY_OUTCOMES) {
    pages[outcome] = (await listRequests(db, { outcome, limit: 500 })).map((r) => r.id);
  }
  const costs: Record<string, unknown> = {};
  for (const by of COST_GROUPS) costs[by] = await costTotals(db, { by, since: 0, until: 1e15 });
  const trends = await trendBuckets(db, { from: 10_000, bucketMs: 5_000, buckets: 6 });
  const recent = await recentAttempts(db, {
    upstreams: ["claude", "openai"],
    since: 0,
    limit: 10,
  });
  return { pages, costs, trends, recent: [...recent] };
}

Deno.test("the partial indexes replace the full ones on an existing database, same answers", async () => {
  const dir = await Deno.makeTempDir({ prefix: "pulsegate_db_" });
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  try {
    // The database as the release before left it: every migration before the partial indexes'
    // (22), then its rows.
    const before = MIGRATIONS.filter((m) => m.version < 22);
    assert.equal((await migrate(db, { migrations: before })).version, 21);
    // Today's writer seeds the rows, so the columns later releases added are there first.
    for (const m of MIGRATIONS.filter((m) => ["usage_source", "mcp_tool_calls"].includes(m.name))) {
      for (const sql of m.sql) await db.client.execute(sql);
    }
    await seed(db);
    // Costs and trends read the rollups (a later release's), made here from the rows.
    for (const m of MIGRATIONS.filter((m) => m.name === "history_rollups")) {
      for (const sql of m.sql) await db.client.execute(sql);
    }
    const indexes = async () =>
      (await db.client.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'requests' " +
          "AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )).rows.map((row) => String(row.name));
    assert.deepEqual(await indexes(), [
      "requests_open",
      "requests_outcome_started",
      "requests_route_started",
      "requests_session_started",
      "requests_started",
      "requests_upstream_started",
    ]);
    const old = await answers(db);

    const upTo22 = MIGRATIONS.filter((m) => m.version <= 22);
    assert.deepEqual((await migrate(db, { migrations: upTo22 })).applied, [22]);
    assert.deepEqual(await indexes(), [
      "requests_errors",
      "requests_open",
      "requests_route_started",
      "requests_session",
      "requests_started",
      "requests_upstream_started",
    ]);
    assert.deepEqual(await answers(db), old);
    // Rows written after the migration land in the new indexes too.
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord({
      id: "after",
      state: "closed",
      startedAt: 99_000,
      outcome: "error",
      errorCode: "gw.request.aborted",
      sessionId: "s-1",
    }));
    assert.equal(await writer.close(), true);
    assert.deepEqual((await listRequests(db, { outcome: "aborted", limit: 1 }))[0]?.id, "after");
    assert.deepEqual((await listRequests(db, { sessionId: "s-1", limit: 1 }))[0]?.id, "after");
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});
