/**
 * Rollups of history (docs/scaling.md "Rollups"): per-minute sums that trends and cost reports
 * read instead of rows, so their cost follows the window's minutes, not its requests.
 *
 * Each sum is kept at three sizes of bucket (`bucket_ms`: a minute, a quarter hour and a UTC day;
 * `bucket_start`: epoch ms, a multiple of it), so a long window reads a few coarse buckets and
 * only its ends read finer ones: at a few requests a minute spread over many routes, keys and
 * upstreams, a minute's rows are hardly fewer than the requests.
 *
 * `rollup_requests`: per bucket a request started in, its route, key, last upstream and outcome
 * class: requests, their tokens and cost, and a sketch of their times to first content
 * (db/first_content_sketch.ts); and, under the hop's own upstream, the hops of those requests
 * that ended in an idle timeout and those that failed over.
 * `rollup_hops`: per bucket a hop started in and its upstream: hops, the requests that reached
 * that upstream (each once, at its first hop there), and the hops' tokens and cost.
 *
 * Kept by triggers, so every write of a row (the history writer's upserts, and the closing of a
 * dead instance's rows in db/instances.ts) updates them in the same statement, hence the same
 * transaction: a rolled-back batch leaves no trace and a retried one is counted once. A row
 * counts as it is stored now: an update takes the row's old contribution away and adds its new
 * one, so a request written open and then closed counts once, in its final state, and a write
 * the upsert refuses (a closed row is final) changes nothing. There are no DELETE triggers:
 * retention removes rows and the rollups stay (they hold no reference to rows).
 *
 * Names with no value (a refused request has no route, key or upstream) are stored as an empty
 * blob: NULL cannot be part of a key that an upsert matches, and a blob never equals a name.
 *
 * This is the text of a shipped migration (db/migrations.ts): never edit it; change the schema
 * with a new migration.
 */
import { sketchBinSql } from "./first_content_sketch.ts";

const NONE = "X''";
const GROUP_COLUMNS = "bucket_ms, bucket_start, route, key_id, upstream, outcome";
const HOP_COLUMNS = "bucket_ms, bucket_start, upstream";

/** The rollup tables (retention prunes each bucket size of each: docs/scaling.md "Retention"). */
export const ROLLUP_TABLE_NAMES = ["rollup_requests", "rollup_hops"] as const;

/** The bucket sizes, in ms: readers pick among them (db/trend_queries.ts, db/cost_queries.ts). */
export const ROLLUP_BUCKETS_MS = [60_000, 900_000, 86_400_000] as const;

/** One row per bucket size: every contribution is written to each. */
const SIZES = `(${ROLLUP_BUCKETS_MS.map((ms) => `SELECT ${ms} AS ms`).join(" UNION ALL ")}) AS s`;

const bucketOf = (at: string) => `(CAST(${at} AS INTEGER) / s.ms * s.ms)`;
const minuteOf = (at: string) => `(CAST(${at} AS INTEGER) / 60000)`;
const named = (column: string) => `COALESCE(${column}, ${NONE})`;

/**
 * The trends' outcome classes (db/trend_queries.ts), one per request: `open` for a request with no
 * outcome yet. A success is a success whatever its error code (the gateway sets one only on an
 * error).
 */
const outcomeClass = (r: string) =>
  `(CASE WHEN ${r}.outcome = 'success' THEN 'success' ` +
  `WHEN ${r}.error_code = 'gw.request.aborted' THEN 'aborted' ` +
  `WHEN ${r}.error_code = 'gw.client.disconnected' THEN 'client_disconnected' ` +
  `WHEN ${r}.outcome = 'error' THEN 'error' ELSE 'open' END)`;

const groupValues = (r: string, upstream: string) => [
  "s.ms",
  bucketOf(`${r}.started_at`),
  named(`${r}.route`),
  named(`${r}.key_id`),
  upstream,
  outcomeClass(r),
];

/**
 * The group of request `r` (the values of GROUP_COLUMNS), with `upstream` standing for its last
 * one or a hop's.
 */
const groupOf = (r: string, upstream: string) => groupValues(r, upstream).join(", ");

/** The same, each value named after its column, for a subquery. */
const namedGroupOf = (r: string, upstream: string) => {
  const columns = GROUP_COLUMNS.split(", ");
  return groupValues(r, upstream).map((value, i) => `${value} AS ${columns[i]}`).join(", ");
};

/** Whether hop `a` failed and the next hop went to another upstream (a failover, as trends count). */
const failedOver = (a: string) =>
  `(${a}.outcome IN ('error', 'idle_timeout') AND EXISTS (SELECT 1 FROM attempts n ` +
  `WHERE n.request_id = ${a}.request_id AND n.hop = ${a}.hop + 1 AND n.upstream <> ${a}.upstream))`;

/** Whether hop `a` is the first of its request on its upstream (it counts the request there). */
const firstOnUpstream = (a: string) =>
  `(NOT EXISTS (SELECT 1 FROM attempts e WHERE e.request_id = ${a}.request_id ` +
  `AND e.upstream = ${a}.upstream AND e.hop < ${a}.hop))`;

const bumpSketch = (bin: string, delta: number) => {
  const path = `'$."' || ${bin} || '"'`;
  const now = `COALESCE(json_extract(first_content, ${path}), 0) + ${delta}`;
  return `CASE WHEN ${bin} IS NULL THEN first_content ` +
    `WHEN ${now} = 0 THEN json_remove(first_content, ${path}) ` +
    `ELSE json_set(first_content, ${path}, ${now}) END`;
};

/** Adds (sign 1) or takes away (sign -1) request `r`'s own contribution. */
function requestRow(r: string, sign: 1 | -1): string {
  const bin = sketchBinSql(`${r}.first_content_ms`);
  const sum = (column: string) => `${sign} * COALESCE(${r}.${column}, 0)`;
  return `INSERT INTO rollup_requests (${GROUP_COLUMNS}, requests, input_tokens, output_tokens,
    cached_tokens, cache_write_tokens, cost_usd, priced, first_content)
  SELECT ${groupOf(r, named(`${r}.upstream`))}, ${sign}, ${sum("input_tokens")},
    ${sum("output_tokens")}, ${sum("cached_tokens")}, ${sum("cache_write_tokens")}, ${
    sum("cost_usd")
  },
    ${sign} * (${r}.cost_usd IS NOT NULL),
    CASE WHEN ${bin} IS NULL THEN '{}' ELSE json_set('{}', '$."' || ${bin} || '"', ${sign}) END
  FROM ${SIZES} WHERE 1
  ON CONFLICT (${GROUP_COLUMNS}) DO UPDATE SET requests = requests + excluded.requests,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cached_tokens = cached_tokens + excluded.cached_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    cost_usd = cost_usd + excluded.cost_usd, priced = priced + excluded.priced,
    first_content = ${bumpSketch(bin, sign)}`;
}

const ADD_HOPS = `ON CONFLICT (${GROUP_COLUMNS}) DO UPDATE SET
    idle_timeouts = idle_timeouts + excluded.idle_timeouts, failovers = failovers + excluded.failovers`;

/** Hop `a`'s idle timeout and failover, under its request's group (nothing without a request row). */
function hopOfRequest(a: string, sign: 1 | -1): string {
  const idle = `(${a}.outcome = 'idle_timeout')`;
  return `INSERT INTO rollup_requests (${GROUP_COLUMNS}, idle_timeouts, failovers)
  SELECT ${groupOf("r", `${a}.upstream`)}, ${sign} * ${idle}, ${sign} * ${failedOver(a)}
  FROM requests r, ${SIZES} WHERE r.id = ${a}.request_id AND (${idle} OR ${failedOver(a)})
  ${ADD_HOPS}`;
}

/**
 * Every hop of request `r` under its group: when the request row comes after its hops' rows, and
 * when its group changes (an open row has no route or outcome yet), the hops move with it.
 * `when` guards the statement (a trigger body has no IF).
 */
function hopsOfRequest(r: string, opts: { sign: 1 | -1; when: string }): string {
  const idle = "SUM(a.outcome = 'idle_timeout')";
  const failovers = `SUM(${failedOver("a")})`;
  return `INSERT INTO rollup_requests (${GROUP_COLUMNS}, idle_timeouts, failovers)
  SELECT ${groupOf(r, "a.upstream")}, ${opts.sign} * ${idle}, ${opts.sign} * ${failovers}
  FROM attempts a, ${SIZES} WHERE a.request_id = ${r}.id AND a.outcome IN ('error', 'idle_timeout')
    AND ${opts.when}
  GROUP BY s.ms, a.upstream HAVING ${idle} + ${failovers} > 0
  ${ADD_HOPS}`;
}

const ADD_HOP_SUMS = `ON CONFLICT (${HOP_COLUMNS}) DO UPDATE SET hops = hops + excluded.hops,
    requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens, cost_usd = cost_usd + excluded.cost_usd,
    priced = priced + excluded.priced`;

/**
 * Hop `a`'s contribution to `rollup_hops`; `first` says whether it counts its request on its
 * upstream (an expression: hop rows may land out of order, a hedge's second hop first).
 */
function hopRow(a: string, opts: { sign: 1 | -1; when: string }): string {
  const { sign } = opts;
  const sum = (column: string) => `${sign} * COALESCE(${a}.${column}, 0)`;
  return `INSERT INTO rollup_hops (${HOP_COLUMNS}, hops, requests, input_tokens,
    output_tokens, cost_usd, priced)
  SELECT s.ms, ${bucketOf(`${a}.started_at`)}, ${a}.upstream, ${sign}, ${sign} * ${
    firstOnUpstream(a)
  },
    ${sum("input_tokens")}, ${sum("output_tokens")}, ${sum("cost_usd")},
    ${sign} * (${a}.cost_usd IS NOT NULL)
  FROM ${SIZES} WHERE ${opts.when}
  ${ADD_HOP_SUMS}`;
}

/**
 * The next hop of `a`'s request on `a`'s upstream after it counts (sign 1) or stops counting
 * (sign -1) the request there, when hop `a` arrives first (or leaves) that upstream.
 */
function nextOnUpstream(a: string, opts: { sign: 1 | -1; when: string }): string {
  return `INSERT INTO rollup_hops (${HOP_COLUMNS}, requests)
  SELECT s.ms, ${bucketOf("l.started_at")}, l.upstream, ${opts.sign} FROM attempts l, ${SIZES}
  WHERE l.request_id = ${a}.request_id AND l.upstream = ${a}.upstream AND l.hop = (
      SELECT MIN(x.hop) FROM attempts x
      WHERE x.request_id = ${a}.request_id AND x.upstream = ${a}.upstream AND x.hop > ${a}.hop)
    AND ${firstOnUpstream(a)} AND ${opts.when}
  ${ADD_HOP_SUMS}`;
}

const hopMoved = `(${minuteOf("OLD.started_at")} <> ${minuteOf("NEW.started_at")} ` +
  `OR OLD.upstream IS NOT NEW.upstream)`;
const groupMoved = `(${minuteOf("OLD.started_at")} <> ${minuteOf("NEW.started_at")} ` +
  `OR OLD.route IS NOT NEW.route OR OLD.key_id IS NOT NEW.key_id ` +
  `OR ${outcomeClass("OLD")} <> ${outcomeClass("NEW")})`;

const trigger = (name: string, on: string, body: string[]) =>
  `CREATE TRIGGER ${name} AFTER ${on} FOR EACH ROW BEGIN\n${body.join(";\n")};\nEND`;

const TABLES = [
  `CREATE TABLE rollup_requests (
    bucket_ms INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    route TEXT NOT NULL,
    key_id TEXT NOT NULL,
    upstream TEXT NOT NULL,
    outcome TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    priced INTEGER NOT NULL DEFAULT 0,
    first_content TEXT NOT NULL DEFAULT '{}',
    idle_timeouts INTEGER NOT NULL DEFAULT 0,
    failovers INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (${GROUP_COLUMNS})
  ) WITHOUT ROWID`,
  `CREATE TABLE rollup_hops (
    bucket_ms INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    upstream TEXT NOT NULL,
    hops INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    priced INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (${HOP_COLUMNS})
  ) WITHOUT ROWID`,
];

// An upsert that updates fires the UPDATE triggers, not the INSERT ones; one whose update the
// WHERE refuses (a final row) fires none. Request and hop keys are never rewritten.
const TRIGGERS = [
  trigger("rollup_request_inserted", "INSERT ON requests", [
    requestRow("NEW", 1),
    hopsOfRequest("NEW", { sign: 1, when: "1" }),
  ]),
  trigger("rollup_request_updated", "UPDATE ON requests", [
    requestRow("OLD", -1),
    requestRow("NEW", 1),
    hopsOfRequest("OLD", { sign: -1, when: groupMoved }),
    hopsOfRequest("NEW", { sign: 1, when: groupMoved }),
  ]),
  trigger("rollup_attempt_inserted", "INSERT ON attempts", [
    hopOfRequest("NEW", 1),
    // The hop before it now has a next hop: a failover when it failed on another upstream.
    `INSERT INTO rollup_requests (${GROUP_COLUMNS}, idle_timeouts, failovers)
    SELECT ${groupOf("r", "p.upstream")}, 0, 1
    FROM ${SIZES} JOIN requests r ON r.id = NEW.request_id
      JOIN attempts p ON p.request_id = r.id AND p.hop = NEW.hop - 1
    WHERE p.outcome IN ('error', 'idle_timeout') AND p.upstream <> NEW.upstream
    ${ADD_HOPS}`,
    hopRow("NEW", { sign: 1, when: "1" }),
    nextOnUpstream("NEW", { sign: -1, when: "1" }),
  ]),
  trigger("rollup_attempt_updated", "UPDATE ON attempts", [
    hopOfRequest("OLD", -1),
    hopOfRequest("NEW", 1),
    `INSERT INTO rollup_requests (${GROUP_COLUMNS}, idle_timeouts, failovers)
    SELECT ${groupOf("r", "p.upstream")}, 0,
      (p.upstream <> NEW.upstream) - (p.upstream <> OLD.upstream)
    FROM ${SIZES} JOIN requests r ON r.id = NEW.request_id
      JOIN attempts p ON p.request_id = r.id AND p.hop = NEW.hop - 1
    WHERE p.outcome IN ('error', 'idle_timeout') AND OLD.upstream IS NOT NEW.upstream
    ${ADD_HOPS}`,
    // Sums only, when the hop stays in its minute and upstream (every update the gateway makes).
    `INSERT INTO rollup_hops (${HOP_COLUMNS}, input_tokens, output_tokens, cost_usd, priced)
    SELECT s.ms, ${bucketOf("NEW.started_at")}, NEW.upstream,
      COALESCE(NEW.input_tokens, 0) - COALESCE(OLD.input_tokens, 0),
      COALESCE(NEW.output_tokens, 0) - COALESCE(OLD.output_tokens, 0),
      COALESCE(NEW.cost_usd, 0) - COALESCE(OLD.cost_usd, 0),
      (NEW.cost_usd IS NOT NULL) - (OLD.cost_usd IS NOT NULL)
    FROM ${SIZES} WHERE NOT ${hopMoved}
    ${ADD_HOP_SUMS}`,
    // Otherwise the old hop leaves (the next on its upstream may now count the request) and
    // the new one arrives.
    hopRow("OLD", { sign: -1, when: hopMoved }),
    nextOnUpstream("OLD", { sign: 1, when: hopMoved }),
    hopRow("NEW", { sign: 1, when: hopMoved }),
    nextOnUpstream("NEW", { sign: -1, when: hopMoved }),
  ]),
];

const MINUTE = `(SELECT 60000 AS ms) AS s`;
const COARSER = `(${
  ROLLUP_BUCKETS_MS.slice(1).map((ms) => `SELECT ${ms} AS ms`).join(" UNION ALL ")
}) AS s`;

/**
 * The rollups of the rows already stored, for a database that had history before them (run in
 * the migration's transaction, after the triggers are made, so nothing is counted twice or
 * lost). Minutes from the rows, one sort of them; the coarser buckets from the minutes.
 */
export const ROLLUP_BACKFILL: readonly string[] = [
  `INSERT INTO rollup_requests (${GROUP_COLUMNS}, requests, input_tokens, output_tokens,
    cached_tokens, cache_write_tokens, cost_usd, priced, first_content)
  SELECT ${GROUP_COLUMNS}, SUM(n), SUM(input_tokens), SUM(output_tokens), SUM(cached_tokens),
    SUM(cache_write_tokens), TOTAL(cost_usd), SUM(priced),
    COALESCE(json_group_object(CAST(bin AS TEXT), n) FILTER (WHERE bin IS NOT NULL), '{}')
  FROM (
    SELECT ${namedGroupOf("r", named("r.upstream"))},
      ${sketchBinSql("r.first_content_ms")} AS bin, COUNT(*) AS n,
      SUM(COALESCE(r.input_tokens, 0)) AS input_tokens,
      SUM(COALESCE(r.output_tokens, 0)) AS output_tokens,
      SUM(COALESCE(r.cached_tokens, 0)) AS cached_tokens,
      SUM(COALESCE(r.cache_write_tokens, 0)) AS cache_write_tokens,
      TOTAL(r.cost_usd) AS cost_usd, COUNT(r.cost_usd) AS priced
    FROM requests r, ${MINUTE} GROUP BY 1, 2, 3, 4, 5, 6, 7
  ) WHERE 1 GROUP BY 1, 2, 3, 4, 5, 6`,
  `INSERT INTO rollup_requests (${GROUP_COLUMNS}, idle_timeouts, failovers)
  SELECT ${groupOf("r", "a.upstream")}, SUM(a.outcome = 'idle_timeout'), SUM(${failedOver("a")})
  FROM ${MINUTE} JOIN attempts a JOIN requests r ON r.id = a.request_id
  WHERE a.outcome IN ('error', 'idle_timeout')
  GROUP BY 1, 2, 3, 4, 5, 6 HAVING SUM(a.outcome = 'idle_timeout') + SUM(${failedOver("a")}) > 0
  ${ADD_HOPS}`,
  `INSERT INTO rollup_requests (${GROUP_COLUMNS}, requests, input_tokens, output_tokens,
    cached_tokens, cache_write_tokens, cost_usd, priced, idle_timeouts, failovers)
  SELECT s.ms, x.bucket_start / s.ms * s.ms, x.route, x.key_id, x.upstream, x.outcome,
    SUM(x.requests), SUM(x.input_tokens), SUM(x.output_tokens), SUM(x.cached_tokens),
    SUM(x.cache_write_tokens), SUM(x.cost_usd), SUM(x.priced), SUM(x.idle_timeouts),
    SUM(x.failovers)
  FROM rollup_requests x, ${COARSER} WHERE x.bucket_ms = 60000 GROUP BY 1, 2, 3, 4, 5, 6`,
  `INSERT INTO rollup_requests (${GROUP_COLUMNS}, first_content)
  SELECT ${GROUP_COLUMNS}, json_group_object(bin, n) FROM (
    SELECT s.ms AS bucket_ms, x.bucket_start / s.ms * s.ms AS bucket_start, x.route AS route,
      x.key_id AS key_id, x.upstream AS upstream, x.outcome AS outcome, j.key AS bin,
      SUM(j.value) AS n
    FROM rollup_requests x, ${COARSER}, json_each(x.first_content) AS j
    WHERE x.bucket_ms = 60000 AND x.first_content <> '{}' GROUP BY 1, 2, 3, 4, 5, 6, 7
  ) WHERE 1 GROUP BY 1, 2, 3, 4, 5, 6
  ON CONFLICT (${GROUP_COLUMNS}) DO UPDATE SET first_content = excluded.first_content`,
  `INSERT INTO rollup_hops (${HOP_COLUMNS}, hops, requests, input_tokens, output_tokens,
    cost_usd, priced)
  SELECT s.ms, ${bucketOf("a.started_at")}, a.upstream, COUNT(*), SUM(${firstOnUpstream("a")}),
    SUM(COALESCE(a.input_tokens, 0)), SUM(COALESCE(a.output_tokens, 0)), TOTAL(a.cost_usd),
    COUNT(a.cost_usd)
  FROM ${MINUTE} JOIN attempts a WHERE 1 GROUP BY 1, 2, 3`,
  `INSERT INTO rollup_hops (${HOP_COLUMNS}, hops, requests, input_tokens, output_tokens,
    cost_usd, priced)
  SELECT s.ms, x.bucket_start / s.ms * s.ms, x.upstream, SUM(x.hops), SUM(x.requests),
    SUM(x.input_tokens), SUM(x.output_tokens), SUM(x.cost_usd), SUM(x.priced)
  FROM rollup_hops x, ${COARSER} WHERE x.bucket_ms = 60000 GROUP BY 1, 2, 3`,
];

/** The migration's statements: tables, triggers, then the rollups of existing rows. */
export const ROLLUP_MIGRATION: readonly string[] = [...TABLES, ...TRIGGERS, ...ROLLUP_BACKFILL];
