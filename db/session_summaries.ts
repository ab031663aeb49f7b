/**
 * Session summaries (docs/scaling.md "Session summaries"): one row per key and session holding
 * what the admin Sessions panel lists of it (db/session_queries.ts `recentSessions`), so the
 * panel reads the sessions active in its window along an index on `last_at`, not every row of
 * the window.
 *
 * Kept by triggers on `requests`, in the row's own statement (as the rollups, db/rollups.ts): an
 * insert adds the row; an update takes the old row's sums away and adds the new one's. The
 * routes and upstreams lists (distinct, the first MAX_NAMES in sorted order) and the first and
 * last start cannot be taken apart by a sum: an update whose old row held a listed name, or the
 * first or last start, that the new row does not hold reads them again from the session's own
 * rows (along `requests_session`), so they stay exact. A session whose rows all leave it (an
 * update that moves a row to another key or session) keeps a summary of no requests, which the
 * panel skips and retention removes: migrations delete nothing (db/migrate_test.ts); a row added
 * to it again starts its times anew. No DELETE trigger: retention
 * removes rows and keeps the summary until its last start leaves the window
 * (db/history_pruner.ts).
 *
 * Sessions are keyed as the panel groups them: the key (an empty blob for none: NULL cannot be
 * part of a key that an upsert matches) and the first MAX_NAME_CHARS of the session id.
 *
 * This is the text of a shipped migration (db/migrations.ts): never edit it; change the schema
 * with a new migration.
 */

/** The longest session id, route or upstream name kept (names are bounded when stored). */
export const SUMMARY_NAME_CHARS = 300;
/** At most this many routes and upstreams listed per session. */
export const SUMMARY_NAMES = 10;

const NONE = "X''";
const keyOf = (r: string) => `COALESCE(${r}.key_id, ${NONE})`;
const sessionOf = (r: string) => `substr(${r}.session_id, 1, ${SUMMARY_NAME_CHARS})`;
/** Routes count only where the request reached an upstream (a refused name is no route). */
const routeOf = (r: string) =>
  `(CASE WHEN ${r}.upstream IS NOT NULL THEN substr(${r}.route, 1, ${SUMMARY_NAME_CHARS}) END)`;
const upstreamOf = (r: string) => `substr(${r}.upstream, 1, ${SUMMARY_NAME_CHARS})`;

/** The sums of a summary: column, and the value row `r` adds. */
const SUMS: readonly (readonly [string, (r: string) => string])[] = [
  ["requests", () => "1"],
  ["input_tokens", (r) => `COALESCE(${r}.input_tokens, 0)`],
  ["output_tokens", (r) => `COALESCE(${r}.output_tokens, 0)`],
  ["cached_tokens", (r) => `COALESCE(${r}.cached_tokens, 0)`],
  ["cache_write_tokens", (r) => `COALESCE(${r}.cache_write_tokens, 0)`],
  ["cost_usd", (r) => `COALESCE(${r}.cost_usd, 0)`],
  // Rows with a cost: the panel's cost is NULL while none is priced (as SUM gives).
  ["priced", (r) => `(${r}.cost_usd IS NOT NULL)`],
  ["moves", (r) => `(${r}.moved_from IS NOT NULL)`],
  [
    "move_cache_write_usd",
    (r) =>
      `(CASE WHEN ${r}.moved_from IS NOT NULL THEN COALESCE(${r}.cache_write_usd, 0) ELSE 0 END)`,
  ],
  ["move_priced", (r) => `(${r}.moved_from IS NOT NULL AND ${r}.cache_write_usd IS NOT NULL)`],
  ["errors", (r) => `COALESCE(${r}.outcome = 'error', 0)`],
  ["budget_refusals", (r) => `COALESCE(${r}.error_code = 'gw.session.budget_exhausted', 0)`],
  ["loop_refusals", (r) => `COALESCE(${r}.error_code = 'gw.session.loop_detected', 0)`],
];

const SUM_COLUMNS = SUMS.map(([column]) => column).join(", ");

const TABLE = `CREATE TABLE session_summaries (
  key_id TEXT NOT NULL,
  session_id TEXT NOT NULL,
  first_at INTEGER NOT NULL,
  last_at INTEGER NOT NULL,
  routes TEXT NOT NULL DEFAULT '[]',
  upstreams TEXT NOT NULL DEFAULT '[]',
  ${
  SUMS.map(([c]) => `${c} ${c.endsWith("usd") ? "REAL" : "INTEGER"} NOT NULL DEFAULT 0`).join(
    ",\n  ",
  )
},
  PRIMARY KEY (key_id, session_id)
) WITHOUT ROWID`;

const INDEX = "CREATE INDEX session_summaries_last ON session_summaries (last_at)";

const listOf = (name: string) =>
  `(CASE WHEN ${name} IS NULL THEN '[]' ELSE json_array(${name}) END)`;

/** The stored list `column` with excluded's name (at most one) added, sorted, capped. */
function withName(column: string): string {
  const stored = `session_summaries.${column}`;
  const name = `json_extract(excluded.${column}, '$[0]')`;
  return `CASE WHEN ${name} IS NULL OR EXISTS (SELECT 1 FROM json_each(${stored}) WHERE value = ${name})
    THEN ${stored} ELSE (SELECT json_group_array(v) FROM (SELECT value AS v FROM json_each(${stored})
      UNION SELECT ${name} ORDER BY v LIMIT ${SUMMARY_NAMES})) END`;
}

/** Adds row `r` to its session's summary (none for a row without a session). */
function addRow(r: string): string {
  return `INSERT INTO session_summaries (key_id, session_id, first_at, last_at, routes, upstreams,
    ${SUM_COLUMNS})
  SELECT ${keyOf(r)}, ${sessionOf(r)}, ${r}.started_at, ${r}.started_at, ${listOf(routeOf(r))},
    ${listOf(upstreamOf(r))}, ${SUMS.map(([, value]) => value(r)).join(", ")}
  WHERE ${r}.session_id IS NOT NULL
  ON CONFLICT (key_id, session_id) DO UPDATE SET
    first_at = CASE WHEN requests > 0 THEN MIN(first_at, excluded.first_at) ELSE excluded.first_at END,
    last_at = CASE WHEN requests > 0 THEN MAX(last_at, excluded.last_at) ELSE excluded.last_at END,
    routes = ${withName("routes")}, upstreams = ${withName("upstreams")},
    ${SUMS.map(([c]) => `${c} = ${c} + excluded.${c}`).join(", ")}`;
}

const ofSession = (r: string) => `key_id = ${keyOf(r)} AND session_id = ${sessionOf(r)}`;

/**
 * The rows of `r`'s session, along `requests_session`: the id itself, or for an id stored longer
 * than the summary keeps (rows from before names were bounded) every id it begins.
 */
function rowsOfSession(r: string): string {
  const s = sessionOf(r);
  return `FROM requests q WHERE (q.session_id = ${s} OR (length(${s}) = ${SUMMARY_NAME_CHARS}
      AND q.session_id > ${s} AND q.session_id < ${s} || char(1114111)))
    AND substr(q.session_id, 1, ${SUMMARY_NAME_CHARS}) = ${s} AND q.key_id IS ${r}.key_id`;
}

const sessionMoved = `(${keyOf("OLD")} IS NOT ${keyOf("NEW")} OR ${sessionOf("OLD")} IS NOT ${
  sessionOf("NEW")
})`;

/** Reads list `column` of OLD's session again when OLD held a listed name NEW does not. */
function relist(column: string, nameOf: (r: string) => string): string {
  return `UPDATE session_summaries SET ${column} = (SELECT json_group_array(v) FROM (
      SELECT DISTINCT ${nameOf("q")} AS v ${rowsOfSession("OLD")} AND ${nameOf("q")} IS NOT NULL
      ORDER BY v LIMIT ${SUMMARY_NAMES}))
  WHERE ${ofSession("OLD")} AND (${sessionMoved} OR ${nameOf("OLD")} IS NOT ${nameOf("NEW")})
    AND EXISTS (SELECT 1 FROM json_each(session_summaries.${column}) WHERE value = ${
    nameOf("OLD")
  })`;
}

const trigger = (name: string, on: string, body: string[]) =>
  `CREATE TRIGGER ${name} AFTER ${on} FOR EACH ROW BEGIN\n${body.join(";\n")};\nEND`;

// An upsert that updates fires the UPDATE trigger, not the INSERT one; one whose update the WHERE
// refuses (a final row) fires none.
const TRIGGERS = [
  trigger("session_summary_inserted", "INSERT ON requests", [addRow("NEW")]),
  trigger("session_summary_updated", "UPDATE ON requests", [
    `UPDATE session_summaries SET ${
      SUMS.map(([c, value]) => `${c} = ${c} - ${value("OLD")}`)
        .join(", ")
    } WHERE ${ofSession("OLD")}`,
    addRow("NEW"),
    relist("routes", routeOf),
    relist("upstreams", upstreamOf),
    // The first or last start again, when OLD's start was one and left (the rows' own MIN and
    // MAX; the stored one if retention has removed them all).
    `UPDATE session_summaries SET
      first_at = COALESCE((SELECT MIN(q.started_at) ${rowsOfSession("OLD")}), first_at),
      last_at = COALESCE((SELECT MAX(q.started_at) ${rowsOfSession("OLD")}), last_at)
    WHERE ${ofSession("OLD")} AND (${sessionMoved} OR OLD.started_at IS NOT NEW.started_at)
      AND (first_at = OLD.started_at OR last_at = OLD.started_at)`,
  ]),
];

const NAMED_ROWS = `FROM requests r WHERE r.session_id IS NOT NULL`;

/** The list `column` of every session, from its rows (the backfill). */
function listBackfill(column: string, nameOf: (r: string) => string): string {
  return `UPDATE session_summaries SET ${column} = x.names FROM (
    SELECT k, s, json_group_array(v) AS names FROM (
      SELECT k, s, v FROM (
        SELECT k, s, v, row_number() OVER (PARTITION BY k, s ORDER BY v) AS n FROM (
          SELECT DISTINCT ${keyOf("r")} AS k, ${sessionOf("r")} AS s, ${nameOf("r")} AS v
          ${NAMED_ROWS} AND ${nameOf("r")} IS NOT NULL))
      WHERE n <= ${SUMMARY_NAMES} ORDER BY k, s, v)
    GROUP BY k, s) AS x
  WHERE session_summaries.key_id = x.k AND session_summaries.session_id = x.s`;
}

/**
 * The summaries of the rows already stored (run in the migration's transaction, after the
 * triggers are made: nothing else writes meanwhile).
 */
const BACKFILL = [
  `INSERT INTO session_summaries (key_id, session_id, first_at, last_at, ${SUM_COLUMNS})
  SELECT ${keyOf("r")}, ${sessionOf("r")}, MIN(r.started_at), MAX(r.started_at),
    ${SUMS.map(([, value]) => `SUM(${value("r")})`).join(", ")}
  ${NAMED_ROWS} GROUP BY 1, 2`,
  listBackfill("routes", routeOf),
  listBackfill("upstreams", upstreamOf),
];

/** The migration's statements: table, index, triggers, then the summaries of existing rows. */
export const SESSION_SUMMARY_MIGRATION: readonly string[] = [
  TABLE,
  INDEX,
  ...TRIGGERS,
  ...BACKFILL,
];
