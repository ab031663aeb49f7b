/**
 * A varied history written the way the gateway writes it, for the rollup tests
 * (docs/scaling.md "Rollups"): requests of every outcome class, on routes, keys and upstreams
 * (and none), with failovers, retries on one upstream, idle timeouts and hedges whose second hop
 * lands first; rows written open and then closed, hops landing before their request, final rows
 * written twice, a reused id refused, a batch retried after its commit, one that failed, and rows
 * of a dead instance closed as interrupted (then written closed by their owner). Also the rollups
 * recomputed from the stored rows in TypeScript, as the oracle.
 */
import assert from "node:assert/strict";
import type { Row } from "@libsql/client";
import { type BatchExecutor, inProcessExecutor } from "../db/batch_executor.ts";
import type { Db } from "../db/client.ts";
import { sketchBin } from "../db/first_content_sketch.ts";
import { HistoryWriter } from "../db/history_writer.ts";
import { closeInterruptedRows } from "../db/instances.ts";
import type { AttemptRecord, RequestRecord } from "../db/records.ts";
import { ROLLUP_BUCKETS_MS } from "../db/rollups.ts";
import { attemptRecord, manualTimers, requestRecord } from "./db_helpers.ts";

/** The tests' "now": not aligned to any bucket. */
export const NOW = Date.UTC(2026, 4, 20, 12, 7, 30, 250);
const HOUR = 3_600_000;

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

const ROUTES = ["smart", "fast", "cheap", null] as const;
const KEYS = ["k1", "k2", "k3", null] as const;
const UPSTREAMS = ["u1", "u2", "u3"] as const;
const OUTCOMES = [
  ["success", null],
  ["success", null],
  ["success", null],
  ["error", "gw.upstream.error"],
  ["error", "gw.request.aborted"],
  ["error", "gw.client.disconnected"],
  ["error", "gw.upstream.timeout"],
] as const;
const FIRST_CONTENT = [null, 0, 3, 17, 27, 28, 95, 240, 1_250, 8_000, 61_000, 120_000];

interface Plan {
  final: RequestRecord;
  hops: AttemptRecord[];
  /** Written open first, as the gateway does (route, key and upstream come with the close). */
  open?: RequestRecord;
  /** Hops written unfinished first (one with another upstream, as a reused id could). */
  openHops?: AttemptRecord[];
  hopsFirst: boolean;
  twice: boolean;
  reused: boolean;
  /** Left open by a dead instance: closed as interrupted; `finish` writes it closed after. */
  dead: boolean;
  finish: boolean;
}

function plans(count: number): Plan[] {
  const rand = random(45);
  const out: Plan[] = [];
  for (let i = 0; i < count; i++) {
    const id = `q${String(i).padStart(4, "0")}`;
    // Over 30 hours before now, some on bucket edges; a few starts are exactly on a minute.
    let startedAt = NOW - Math.floor(rand() * 30 * HOUR);
    if (i % 17 === 0) startedAt -= startedAt % 60_000;
    if (i % 41 === 0) startedAt -= startedAt % 900_000;
    const [outcome, errorCode] = pick(rand, OUTCOMES);
    const hopCount = 1 + Math.floor(rand() * rand() * 4);
    const hops: AttemptRecord[] = [];
    let upstream: string = pick(rand, UPSTREAMS);
    let sentAt = startedAt;
    for (let hop = 1; hop <= hopCount; hop++) {
      // Hops are numbered in the order they are sent; one may start in the next minute.
      sentAt += Math.floor(rand() * 40_000);
      const last = hop === hopCount;
      const priced = rand() < 0.8;
      hops.push(attemptRecord({
        requestId: id,
        hop,
        upstream,
        outcome: last
          ? (outcome === "success" ? "success" : pick(rand, ["error", "idle_timeout"] as const))
          : pick(rand, ["error", "idle_timeout", "idle_timeout", "hedge_lost"] as const),
        startedAt: sentAt,
        inputTokens: rand() < 0.1 ? null : Math.floor(rand() * 5_000),
        outputTokens: rand() < 0.2 ? null : Math.floor(rand() * 900),
        costUsd: priced ? Math.round(rand() * 1e6) / 1e7 : null,
      }));
      // The next hop: a failover to another upstream, or a retry on the same one.
      if (rand() < 0.6) upstream = pick(rand, UPSTREAMS.filter((u) => u !== upstream));
    }
    const costs = hops.map((h) => h.costUsd).filter((c): c is number => c !== null);
    const noRoute = i % 23 === 0;
    const final = requestRecord({
      id,
      instanceId: "live",
      state: "closed",
      startedAt,
      endedAt: startedAt + 60_000,
      route: noRoute ? null : pick(rand, ROUTES),
      keyId: pick(rand, KEYS),
      upstream: noRoute ? null : hops.at(-1)!.upstream,
      outcome,
      errorCode,
      status: outcome === "success" ? 200 : 502,
      firstContentMs: pick(rand, FIRST_CONTENT),
      inputTokens: hops.reduce((n, h) => n + (h.inputTokens ?? 0), 0),
      outputTokens: rand() < 0.1 ? null : hops.reduce((n, h) => n + (h.outputTokens ?? 0), 0),
      cachedTokens: rand() < 0.5 ? null : Math.floor(rand() * 100),
      cacheWriteTokens: rand() < 0.5 ? null : Math.floor(rand() * 100),
      costUsd: costs.length ? costs.reduce((a, b) => a + b, 0) : null,
    });
    const dead = i % 19 === 5;
    const openFirst = dead || rand() < 0.4;
    out.push({
      final,
      hops,
      open: openFirst
        ? requestRecord({
          id,
          instanceId: dead ? "dead" : "live",
          startedAt: i % 29 === 0 ? startedAt - 120_000 : startedAt,
          firstContentMs: i % 3 === 0 ? final.firstContentMs : null,
        })
        : undefined,
      openHops: rand() < 0.3
        ? hops.map((h, n) => ({
          ...h,
          outcome: null,
          inputTokens: null,
          outputTokens: null,
          costUsd: null,
          upstream: n === 0 && i % 5 === 0 ? "u9" : h.upstream,
          startedAt: n === 0 && i % 10 === 0 ? h.startedAt - 90_000 : h.startedAt,
        }))
        : undefined,
      hopsFirst: !dead && rand() < 0.2,
      twice: !dead && rand() < 0.2,
      reused: !dead && rand() < 0.05,
      dead,
      finish: dead && i % 2 === 0,
    });
  }
  return out;
}

/** An executor that loses its next batches' answers: after the commit, or before it. */
export class FlakyExecutor implements BatchExecutor {
  #inner: BatchExecutor;
  /** What happens to the next batch. */
  next: "commit" | "lose-reply" | "fail" = "commit";
  constructor(db: Db) {
    this.#inner = inProcessExecutor(db);
  }
  async run(statements: Parameters<BatchExecutor["run"]>[0]): Promise<void> {
    const mode = this.next;
    this.next = "commit";
    if (mode === "fail") throw new Error("the database went away before the commit");
    await this.#inner.run(statements);
    if (mode === "lose-reply") throw new Error("the answer to a committed batch was lost");
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
}

/** Writes the varied history into `db` as the gateway would; answers its final records. */
export async function writeVariedHistory(
  db: Db,
  opts: { requests?: number; check?: () => Promise<void> } = {},
): Promise<void> {
  const all = plans(opts.requests ?? 300);
  const executor = new FlakyExecutor(db);
  const writer = new HistoryWriter(db, { ...manualTimers, executor, batchSize: 64 });
  const check = opts.check ?? (() => Promise.resolve());
  const flushed = async () => {
    assert.equal(await writer.flush(), true);
    await check();
  };
  // Open rows, unfinished hops, and the finished hops of requests whose row comes later (in
  // reverse, as a hedge's second hop may end first). A dead instance's last hop stays open.
  for (const p of all) {
    if (p.open) writer.writeRequest(p.open);
    for (const h of p.openHops ?? []) writer.writeAttempt(h);
    if (p.dead) writer.writeAttempt({ ...p.hops.at(-1)!, outcome: null, costUsd: null });
    if (p.hopsFirst) { for (const h of [...p.hops].reverse()) writer.writeAttempt({ ...h }); }
  }
  await flushed();
  // The hops end; their first batch commits but its answer is lost, so it is written again.
  for (const p of all) {
    if (p.hopsFirst) continue;
    for (const h of p.dead ? p.hops.slice(0, -1) : p.hops) writer.writeAttempt({ ...h });
  }
  executor.next = "lose-reply";
  assert.equal(await writer.flush(), false);
  await flushed();
  // The requests end (not the dead instance's); the first batch fails before its commit.
  for (const p of all) if (!p.dead) writer.writeRequest({ ...p.final });
  executor.next = "fail";
  assert.equal(await writer.flush(), false);
  await flushed();
  // Final rows written again, and a reused id whose row must not replace the final one.
  for (const p of all) {
    if (p.twice) writer.writeRequest({ ...p.final });
    if (p.reused) {
      writer.writeRequest({ ...p.final, route: "intruder", startedAt: NOW - 5 * HOUR });
    }
  }
  await flushed();
  // Another instance finds the dead one's open rows and closes them as interrupted.
  const interrupted = await closeInterruptedRows(db, {
    instanceId: "live",
    now: NOW,
    staleAfterMs: 60_000,
  });
  assert.equal(interrupted, all.filter((p) => p.dead).length);
  await check();
  // The owner was alive after all: its closed rows replace the interrupted ones (its hop closed
  // as an error stays: an ended hop is final).
  for (const p of all) {
    if (!p.finish) continue;
    writer.writeRequest({ ...p.final });
    writer.writeAttempt({ ...p.hops.at(-1)! });
  }
  await flushed();
  await writer.close();
}

/** The empty blob that stands for no route, key or upstream in the rollups. */
export const NONE = "∅";

export interface RollupSums {
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
  priced: number;
  sketch: Record<string, number>;
  idleTimeouts: number;
  failovers: number;
}

export interface HopSums {
  hops: number;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  priced: number;
}

export interface Rollups {
  requests: Map<string, RollupSums>;
  hops: Map<string, HopSums>;
}

const name = (v: unknown) => typeof v === "string" ? v : NONE;
const n = (v: unknown) => typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : 0;

function outcomeClass(r: Row): string {
  if (r.outcome === "success") return "success";
  if (r.error_code === "gw.request.aborted") return "aborted";
  if (r.error_code === "gw.client.disconnected") return "client_disconnected";
  if (r.outcome === "error") return "error";
  return "open";
}

const emptySums = (): RollupSums => ({
  requests: 0,
  inputTokens: 0,
  outputTokens: 0,
  cachedTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0,
  priced: 0,
  sketch: {},
  idleTimeouts: 0,
  failovers: 0,
});

/** The rollups, recomputed from the stored rows by their definition (db/rollups.ts). */
export async function rollupsFromRows(db: Db): Promise<Rollups> {
  const requests = (await db.client.execute("SELECT * FROM requests")).rows;
  const attempts = (await db.client.execute("SELECT * FROM attempts")).rows;
  const byId = new Map(requests.map((r) => [String(r.id), r]));
  const hop = new Map(attempts.map((a) => [`${a.request_id}/${n(a.hop)}`, a]));
  const out: Rollups = { requests: new Map(), hops: new Map() };
  const sums = (key: string) => {
    let s = out.requests.get(key);
    if (!s) out.requests.set(key, s = emptySums());
    return s;
  };
  for (const ms of ROLLUP_BUCKETS_MS) {
    const bucket = (at: unknown) => Math.floor(n(at) / ms) * ms;
    const group = (r: Row, upstream: string) =>
      [ms, bucket(r.started_at), name(r.route), name(r.key_id), upstream, outcomeClass(r)].join(
        "|",
      );
    for (const r of requests) {
      const s = sums(group(r, name(r.upstream)));
      s.requests++;
      s.inputTokens += n(r.input_tokens);
      s.outputTokens += n(r.output_tokens);
      s.cachedTokens += n(r.cached_tokens);
      s.cacheWriteTokens += n(r.cache_write_tokens);
      s.costUsd += n(r.cost_usd);
      if (r.cost_usd !== null) s.priced++;
      if (r.first_content_ms !== null) {
        const bin = String(sketchBin(n(r.first_content_ms)));
        s.sketch[bin] = (s.sketch[bin] ?? 0) + 1;
      }
    }
    for (const a of attempts) {
      const r = byId.get(String(a.request_id));
      const next = hop.get(`${a.request_id}/${n(a.hop) + 1}`);
      const idle = a.outcome === "idle_timeout";
      const failover = (a.outcome === "error" || idle) && next !== undefined &&
        next.upstream !== a.upstream;
      if (r && (idle || failover)) {
        const s = sums(group(r, String(a.upstream)));
        if (idle) s.idleTimeouts++;
        if (failover) s.failovers++;
      }
      const key = [ms, bucket(a.started_at), String(a.upstream)].join("|");
      let h = out.hops.get(key);
      if (!h) {
        out.hops.set(
          key,
          h = { hops: 0, requests: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, priced: 0 },
        );
      }
      const first = !attempts.some((e) =>
        e.request_id === a.request_id && e.upstream === a.upstream && n(e.hop) < n(a.hop)
      );
      h.hops++;
      if (first) h.requests++;
      h.inputTokens += n(a.input_tokens);
      h.outputTokens += n(a.output_tokens);
      h.costUsd += n(a.cost_usd);
      if (a.cost_usd !== null) h.priced++;
    }
  }
  return out;
}

/** The rollup tables as stored, without the rows of zeros a moved group leaves. */
export async function storedRollups(db: Db): Promise<Rollups> {
  const out: Rollups = { requests: new Map(), hops: new Map() };
  for (const r of (await db.client.execute("SELECT * FROM rollup_requests")).rows) {
    if (n(r.requests) === 0 && n(r.idle_timeouts) === 0 && n(r.failovers) === 0) continue;
    const key = [
      n(r.bucket_ms),
      n(r.bucket_start),
      name(r.route),
      name(r.key_id),
      name(r.upstream),
      r.outcome,
    ].join("|");
    out.requests.set(key, {
      requests: n(r.requests),
      inputTokens: n(r.input_tokens),
      outputTokens: n(r.output_tokens),
      cachedTokens: n(r.cached_tokens),
      cacheWriteTokens: n(r.cache_write_tokens),
      costUsd: n(r.cost_usd),
      priced: n(r.priced),
      sketch: JSON.parse(String(r.first_content)),
      idleTimeouts: n(r.idle_timeouts),
      failovers: n(r.failovers),
    });
  }
  for (const h of (await db.client.execute("SELECT * FROM rollup_hops")).rows) {
    if (n(h.hops) === 0 && n(h.requests) === 0) continue;
    out.hops.set([n(h.bucket_ms), n(h.bucket_start), String(h.upstream)].join("|"), {
      hops: n(h.hops),
      requests: n(h.requests),
      inputTokens: n(h.input_tokens),
      outputTokens: n(h.output_tokens),
      costUsd: n(h.cost_usd),
      priced: n(h.priced),
    });
  }
  return out;
}

/** Sums keyed alike, with costs compared to 1e-9 (sums in another order). */
export function assertSameRollups(actual: Rollups, expected: Rollups): void {
  const round = <T extends { costUsd: number }>(m: Map<string, T>) =>
    [...m].map(([k, v]) => [k, { ...v, costUsd: Math.round(v.costUsd * 1e9) / 1e9 }]).sort((
      a,
      b,
    ) => String(a[0]).localeCompare(String(b[0])));
  assert.deepEqual(round(actual.requests), round(expected.requests));
  assert.deepEqual(round(actual.hops), round(expected.hops));
}
