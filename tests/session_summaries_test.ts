import assert from "node:assert/strict";
import type { Row } from "@libsql/client";
import { openDatabase } from "../db/client.ts";
import type { Db } from "../db/client.ts";
import { HistoryPruner } from "../db/history_pruner.ts";
import { REQUEST_COLUMNS } from "../db/history_rows.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { closeInterruptedRows } from "../db/instances.ts";
import { migrate } from "../db/migrate.ts";
import { MIGRATIONS } from "../db/migrations.ts";
import type { RequestRecord } from "../db/records.ts";
import { recentSessions, type SessionRow } from "../db/session_queries.ts";
import { manualTimers, requestRecord, withTempDb } from "./db_helpers.ts";
import { SESSIONS_FROM_ROWS } from "./fixtures/sessions_from_rows.ts";

/**
 * docs/scaling.md "Session summaries": the summaries the triggers keep equal what the Sessions
 * panel's former query grouped from the rows (kept here as the oracle), after every write of a
 * varied history written as the gateway writes it, and after arbitrary rewrites of rows; an
 * upgraded database gets the same from its rows; retention removes them with their last row.
 */

const NOW = Date.UTC(2026, 4, 20, 12, 7, 30, 250);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const n = (v: unknown) => typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : 0;
const orNull = (v: unknown) => v === null ? null : n(v);
/** A list as the summaries keep it: distinct names, the first ten in sorted order. */
const capped = (json: unknown) =>
  (JSON.parse(String(json)) as unknown[]).filter((v): v is string => typeof v === "string")
    .sort().slice(0, 10);

async function fromRows(db: Db, since = 0): Promise<SessionRow[]> {
  const rows = (await db.client.execute({ sql: SESSIONS_FROM_ROWS, args: [since, 100_000] })).rows;
  return rows.map((r: Row) => ({
    keyId: r.key_id === null ? null : String(r.key_id),
    sessionId: String(r.session_id),
    requests: n(r.requests),
    firstAt: n(r.first_at),
    lastAt: n(r.last_at),
    routes: capped(r.routes),
    upstreams: capped(r.upstreams),
    inputTokens: n(r.input_tokens),
    outputTokens: n(r.output_tokens),
    cachedTokens: n(r.cached_tokens),
    cacheWriteTokens: n(r.cache_write_tokens),
    costUsd: orNull(r.cost_usd),
    moves: n(r.moves),
    moveCacheWriteUsd: orNull(r.move_cache_write_usd),
    errors: n(r.errors),
    budgetRefusals: n(r.budget_refusals),
    loopRefusals: n(r.loop_refusals),
  }));
}

/** Sessions in one order (ties of last_at have none), costs to 1e-9 (sums in another order). */
function normal(rows: SessionRow[]) {
  const cost = (v: number | null) => v === null ? null : Math.round(v * 1e9) / 1e9;
  return rows.map((r) => ({
    ...r,
    routes: [...r.routes].sort(),
    upstreams: [...r.upstreams].sort(),
    costUsd: cost(r.costUsd),
    moveCacheWriteUsd: cost(r.moveCacheWriteUsd),
  })).sort((a, b) =>
    JSON.stringify([a.keyId, a.sessionId]).localeCompare(JSON.stringify([b.keyId, b.sessionId]))
  );
}

async function assertSame(db: Db, label: string, since = 0): Promise<number> {
  const expected = normal(await fromRows(db, since));
  const actual = normal(await recentSessions(db, { since, limit: 100_000 }));
  assert.deepEqual(actual, expected, label);
  return expected.length;
}

/** Deterministic pseudo-random numbers (mulberry32), so a failure reproduces. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(rand: () => number, list: readonly T[]): T =>
  list[Math.floor(rand() * list.length)]!;

// Two ids stored before names were bounded, alike in their first 300 characters: one session.
const LONG = "L".repeat(300);
const SESSIONS = ["s1", "s2", "s3", "p:shared", `${LONG}a`, `${LONG}b`, "wide", null] as const;
const KEYS = ["k1", "k2", null] as const;
const UPSTREAMS = ["u1", "u2", "u3"] as const;

interface Plan {
  final: RequestRecord;
  /** Open rows written first, in order (a failover while running rewrites the open row). */
  open: RequestRecord[];
  twice: boolean;
  reused: boolean;
  dead: boolean;
  finish: boolean;
}

function plans(count: number): Plan[] {
  const rand = random(28);
  const out: Plan[] = [];
  for (let i = 0; i < count; i++) {
    const id = `s${String(i).padStart(4, "0")}`;
    const startedAt = NOW - Math.floor(rand() * 30 * HOUR);
    const sessionId = pick(rand, SESSIONS);
    const kind = rand();
    // Refused before any upstream: an invented model name (404), a budget or a loop refusal.
    const wide = sessionId === "wide";
    const refused = kind < 0.25 && !wide;
    const code = wide
      ? null
      : kind < 0.1
      ? "gw.route.not_found"
      : kind < 0.17
      ? "gw.session.budget_exhausted"
      : kind < 0.25
      ? "gw.session.loop_detected"
      : kind < 0.35
      ? "gw.upstream.error"
      : null;
    // One session reaches many routes: more than the list keeps.
    const route = wide
      ? `r${String(i % 14).padStart(2, "0")}`
      : code === "gw.route.not_found"
      ? `no-such-model-${i}`
      : pick(rand, ["smart", "fast", "cheap", null] as const);
    const upstream = refused ? null : pick(rand, UPSTREAMS);
    const moved = !refused && rand() < 0.2;
    const final = requestRecord({
      id,
      instanceId: "live",
      state: "closed",
      startedAt,
      endedAt: startedAt + 30_000,
      route,
      keyId: wide ? "k1" : pick(rand, KEYS),
      sessionId,
      upstream,
      outcome: code === null ? "success" : "error",
      errorCode: code,
      status: code === null ? 200 : 502,
      inputTokens: refused || rand() < 0.1 ? null : Math.floor(rand() * 5_000),
      outputTokens: refused || rand() < 0.2 ? null : Math.floor(rand() * 900),
      cachedTokens: rand() < 0.5 ? null : Math.floor(rand() * 100),
      cacheWriteTokens: rand() < 0.5 ? null : Math.floor(rand() * 100),
      // One session is never priced: its cost is none, not 0.
      costUsd: refused || sessionId === "p:shared" || rand() < 0.25
        ? null
        : Math.round(rand() * 1e6) / 1e7,
      movedFrom: moved ? pick(rand, UPSTREAMS) : null,
      cacheWriteUsd: moved && rand() < 0.7 ? Math.round(rand() * 1e5) / 1e7 : null,
    });
    const dead = i % 19 === 5;
    const open: RequestRecord[] = [];
    if (dead || rand() < 0.5) {
      // As the gateway writes a running request: no outcome yet; here and there another key,
      // session or start than the final row, and an upstream it left for another.
      const first = requestRecord({
        id,
        instanceId: dead ? "dead" : "live",
        startedAt: i % 5 === 0 ? startedAt - 120_000 : startedAt,
        route: i % 3 === 0 ? route : null,
        keyId: i % 7 === 0 ? null : final.keyId,
        sessionId: i % 13 === 0 ? pick(rand, SESSIONS) : sessionId,
        upstream: i % 4 === 0 ? "u9" : null,
      });
      open.push(first);
      if (i % 8 === 0) open.push({ ...first, upstream: pick(rand, UPSTREAMS), route });
    }
    out.push({
      final,
      open,
      twice: !dead && rand() < 0.2,
      reused: !dead && rand() < 0.05,
      dead,
      finish: dead && i % 2 === 0,
    });
  }
  return out;
}

/** Writes the varied history through the real writer; `check` after every flush. */
async function writeHistory(db: Db, check: (label: string) => Promise<void>): Promise<void> {
  const all = plans(260);
  const writer = new HistoryWriter(db, { ...manualTimers, batchSize: 32 });
  const flushed = async (label: string) => {
    assert.equal(await writer.flush(), true);
    await check(label);
  };
  for (const p of all) if (p.open[0]) writer.writeRequest(p.open[0]);
  await flushed("open rows");
  for (const p of all) if (p.open[1]) writer.writeRequest(p.open[1]);
  await flushed("open rows rewritten");
  for (const p of all) if (!p.dead) writer.writeRequest({ ...p.final });
  await flushed("rows closed");
  for (const p of all) {
    if (p.twice) writer.writeRequest({ ...p.final });
    if (p.reused) writer.writeRequest({ ...p.final, route: "intruder", sessionId: "intruder" });
  }
  await flushed("final rows again, a reused id refused");
  await closeInterruptedRows(db, { instanceId: "live", now: NOW, staleAfterMs: 60_000 });
  await check("a dead instance's rows closed as interrupted");
  for (const p of all) if (p.finish) writer.writeRequest({ ...p.final });
  await flushed("interrupted rows closed by their owner");
  await writer.close();
}

Deno.test("session summaries equal the sessions grouped from rows, after every write of a varied history", async () => {
  await withTempDb(async ({ db }) => {
    const checked: string[] = [];
    await writeHistory(db, async (label) => {
      checked.push(label);
      await assertSame(db, label);
    });
    assert.equal(checked.length, 6);
    // The history is as varied as meant: a list past its cap, a session under several keys,
    // ids alike in their first 300 characters, refusals, moves, unpriced sessions.
    const sessions = await recentSessions(db, { since: 0, limit: 1_000 });
    const wide = sessions.find((s) => s.sessionId === "wide" && s.routes.length === 10);
    assert.ok(wide, "a session past the list's cap");
    assert.ok(new Set(sessions.filter((s) => s.sessionId === "s1").map((s) => s.keyId)).size >= 3);
    assert.ok(sessions.some((s) => s.sessionId === LONG));
    assert.ok(
      sessions.some((s) => s.budgetRefusals > 0) && sessions.some((s) => s.loopRefusals > 0),
    );
    assert.ok(sessions.some((s) => s.moves > 0 && s.moveCacheWriteUsd !== null));
    assert.ok(sessions.some((s) => s.costUsd === null));
    // The window: the sessions with a request started in it, as the rows give them.
    const since = NOW - 6 * HOUR;
    const inWindow = await recentSessions(db, { since, limit: 1_000 });
    assert.deepEqual(
      inWindow.map((s) => [s.keyId, s.sessionId]).sort(),
      (await fromRows(db, since)).map((s) => [s.keyId, s.sessionId]).sort(),
    );
    // Most recent first, and the limit is honoured.
    const lasts = inWindow.map((s) => s.lastAt);
    assert.deepEqual(lasts, [...lasts].sort((a, b) => b - a));
    assert.equal((await recentSessions(db, { since: 0, limit: 3 })).length, 3);
  });
});

Deno.test("session summaries follow any rewrite of a row: key, session, start, route, upstream", async () => {
  await withTempDb(async ({ db }) => {
    await writeHistory(db, () => Promise.resolve());
    const ids = (await db.client.execute("SELECT id FROM requests ORDER BY id")).rows
      .map((r) => String(r.id));
    const rand = random(7);
    for (let i = 0; i < 80; i++) {
      const id = pick(rand, ids);
      const set: [string, unknown][] = [
        ["key_id", pick(rand, KEYS)],
        ["session_id", pick(rand, SESSIONS)],
        ["started_at", NOW - Math.floor(rand() * 40 * HOUR)],
        ["route", pick(rand, ["smart", "r03", "r13", "fresh", null])],
        ["upstream", pick(rand, [...UPSTREAMS, "u7", null])],
        ["cost_usd", rand() < 0.5 ? null : rand()],
        ["outcome", pick(rand, ["success", "error", null])],
        ["moved_from", pick(rand, ["u1", null])],
      ].filter(() => rand() < 0.4) as [string, unknown][];
      if (set.length === 0) continue;
      await db.client.execute({
        sql: `UPDATE requests SET ${set.map(([c]) => `${c} = ?`).join(", ")} WHERE id = ?`,
        args: [...set.map(([, v]) => v as string | number | null), id],
      });
      await assertSame(db, `rewrite ${i} of ${id}: ${JSON.stringify(set)}`);
    }
  });
});

Deno.test("an upgraded database gets the session summaries of the rows it had", async () => {
  await withTempDb(async ({ db }) => {
    await writeHistory(db, () => Promise.resolve());
    const dir = await Deno.makeTempDir({ prefix: "pulsegate_summaries_" });
    const old = await openDatabase(`file:${dir}/old.db`);
    try {
      const at = MIGRATIONS.findIndex((m) => m.name === "session_summaries");
      await migrate(old, { migrations: MIGRATIONS.slice(0, at) });
      const rows = (await db.client.execute("SELECT * FROM requests")).rows;
      // The rows as that release stored them: only the columns its schema had (later
      // migrations add more).
      const had = new Set(
        (await old.client.execute("PRAGMA table_info(requests)")).rows.map((r) => String(r.name)),
      );
      const columns = Object.values(REQUEST_COLUMNS).filter((c) => had.has(c));
      await old.client.batch(
        rows.map((row) => ({
          sql: `INSERT INTO requests (${columns.join(", ")}) VALUES (${
            columns.map(() => "?").join(", ")
          })`,
          args: columns.map((c) => row[c] ?? null),
        })),
        "write",
      );
      assert.deepEqual(
        (await migrate(old)).applied,
        MIGRATIONS.slice(at).map((m) => m.version),
      );
      assert.ok(await assertSame(old, "upgraded") > 12);
      assert.deepEqual(
        normal(await recentSessions(old, { since: 0, limit: 1_000 })),
        normal(await recentSessions(db, { since: 0, limit: 1_000 })),
      );
    } finally {
      old.close();
      await Deno.remove(dir, { recursive: true });
    }
  });
});

Deno.test("the panel reads summaries along last_at, and retention removes them with their last row", async () => {
  await withTempDb(async ({ db }) => {
    const plan = await db.client.execute({
      sql: "EXPLAIN QUERY PLAN " +
        "SELECT * FROM session_summaries WHERE last_at >= ? ORDER BY last_at DESC LIMIT ?",
      args: [0, 50],
    });
    assert.match(plan.rows.map((r) => String(r.detail)).join("\n"), /session_summaries_last/);
    const writer = new HistoryWriter(db, manualTimers);
    // Sessions whose last request is 40, 31 and 29 days old, and one of today; 30 days kept.
    const ages = [40, 31, 29, 0];
    ages.forEach((days, i) => {
      for (const back of [2, 0]) {
        writer.writeRequest(requestRecord({
          id: `r${i}-${back}`,
          state: "closed",
          outcome: "success",
          sessionId: `s${days}`,
          startedAt: NOW - (days + back) * DAY,
        }));
      }
    });
    assert.equal(await writer.flush(), true);
    const pruner = new HistoryPruner(db, {
      writer,
      clock: { now: () => NOW, after: () => () => {} },
      policy: () => ({ retentionDays: 30, rollupRetentionDays: 400 }),
      batch: 1,
    });
    const report = await pruner.pruneNow();
    assert.equal(report?.sessionSummaries, 2);
    const left = await db.client.execute("SELECT session_id FROM session_summaries ORDER BY 1");
    assert.deepEqual(left.rows.map((r) => r.session_id), ["s0", "s29"]);
    // The session of 29 days keeps its whole sums, though one of its rows has gone.
    const s29 = (await recentSessions(db, { since: NOW - 29 * DAY, limit: 10 }))
      .find((s) => s.sessionId === "s29");
    assert.equal(s29?.requests, 2);
    await writer.close();
  });
});
