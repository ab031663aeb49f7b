import { ROLLUP_MIGRATION } from "./rollups.ts";
import { SESSION_SUMMARY_MIGRATION } from "./session_summaries.ts";

/**
 * Schema history. Embedded in code so a compiled binary and Deno Deploy need no files.
 *
 * Rules for adding one: append with the next version, never edit a shipped migration, and
 * never drop or rewrite history tables or rows (docs/design.md "History") — only add tables and
 * columns. Indexes hold no history: one may be replaced (dropped and made anew) when the queries
 * it served need another, since every history write pays for every index.
 * Columns carry no CHECK constraints so a later release can add states and outcomes without
 * rebuilding a million-row table.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: readonly string[];
}

const REQUESTS = `CREATE TABLE requests (
  id TEXT PRIMARY KEY NOT NULL,
  instance_id TEXT NOT NULL,
  state TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  client_format TEXT NOT NULL,
  route TEXT,
  stream INTEGER NOT NULL,
  key_id TEXT,
  session_id TEXT,
  status INTEGER,
  outcome TEXT,
  failure_source TEXT,
  error_code TEXT,
  error_message TEXT,
  upstream TEXT,
  upstream_model TEXT,
  first_content_ms INTEGER,
  duration_ms INTEGER,
  input_tokens INTEGER,
  output_tokens INTEGER,
  cached_tokens INTEGER,
  reasoning_tokens INTEGER
)`;

const ATTEMPTS = `CREATE TABLE attempts (
  request_id TEXT NOT NULL,
  hop INTEGER NOT NULL,
  upstream TEXT NOT NULL,
  model TEXT NOT NULL,
  outcome TEXT,
  status INTEGER,
  error_code TEXT,
  error_message TEXT,
  started_at INTEGER NOT NULL,
  headers_ms INTEGER,
  first_content_ms INTEGER,
  duration_ms INTEGER,
  input_tokens INTEGER,
  output_tokens INTEGER,
  PRIMARY KEY (request_id, hop)
)`;

const CONFIG = `CREATE TABLE config (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  body TEXT NOT NULL,
  updated_at INTEGER NOT NULL
)`;

const COOLDOWNS = `CREATE TABLE cooldowns (
  upstream TEXT PRIMARY KEY NOT NULL,
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  pause_count INTEGER NOT NULL DEFAULT 0,
  paused_until INTEGER,
  updated_at INTEGER NOT NULL
)`;

const INSTANCES = `CREATE TABLE instances (
  id TEXT PRIMARY KEY NOT NULL,
  started_at INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL
)`;

// History pages are keyset-paged on (started_at, id) newest first, optionally narrowed by one
// filter: each index ends in that pair so the page is an index range scan with no sort step.
const HISTORY_INDEXES = [
  "CREATE INDEX requests_started ON requests (started_at DESC, id DESC)",
  "CREATE INDEX requests_route_started ON requests (route, started_at, id)",
  "CREATE INDEX requests_upstream_started ON requests (upstream, started_at, id)",
  "CREATE INDEX requests_outcome_started ON requests (outcome, started_at, id)",
  "CREATE INDEX requests_session_started ON requests (session_id, started_at, id)",
  // Partial: only live rows are ever looked up by state, and they are a handful among millions.
  "CREATE INDEX requests_open ON requests (instance_id) WHERE state = 'open'",
  "CREATE INDEX attempts_upstream_started ON attempts (upstream, started_at)",
];

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "initial_schema",
    sql: [REQUESTS, ATTEMPTS, CONFIG, COOLDOWNS, INSTANCES, ...HISTORY_INDEXES],
  },
  {
    // docs/scaling.md: an abort that reaches another instance is forwarded to the owner's address.
    version: 2,
    name: "instance_url",
    sql: ["ALTER TABLE instances ADD COLUMN url TEXT"],
  },
  {
    // docs/observability.md: guardrails and export destinations, edited through the admin API.
    version: 3,
    name: "guardrails_and_destinations",
    sql: [
      `CREATE TABLE guardrails (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        body TEXT NOT NULL,
        updated_at INTEGER NOT NULL
      )`,
      `CREATE TABLE destinations (
        id TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      )`,
    ],
  },
  {
    // Which of the client's provider headers a translated attempt could not carry.
    version: 4,
    name: "attempt_dropped_headers",
    sql: ["ALTER TABLE attempts ADD COLUMN dropped_headers TEXT"],
  },
  {
    // A counter raised by every save, so instances sharing the database see a new config at their
    // next heartbeat by comparing one number (docs/scaling.md).
    version: 6,
    name: "config_version",
    sql: ["ALTER TABLE config ADD COLUMN version INTEGER NOT NULL DEFAULT 1"],
  },
  {
    // Mid-stream resume (docs/liveness.md): where a resuming hop continued the answer.
    version: 9,
    name: "attempt_resume_offset",
    sql: ["ALTER TABLE attempts ADD COLUMN resume_offset INTEGER"],
  },
  {
    // Why an upstream was last paused, shown beside the pause on the admin page.
    version: 10,
    name: "cooldown_reason",
    sql: ["ALTER TABLE cooldowns ADD COLUMN reason TEXT"],
  },
  {
    // docs/config.md "Prices and key limits": cost per hop and per request, and the usage
    // counters key limits read (per key: one row per second for requests and billed tokens,
    // one row per UTC day for cost), shared by every instance on the database.
    version: 11,
    name: "cost_and_key_usage",
    sql: [
      "ALTER TABLE requests ADD COLUMN cost_usd REAL",
      "ALTER TABLE attempts ADD COLUMN cost_usd REAL",
      `CREATE TABLE key_usage (
        key_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('second', 'day')),
        start INTEGER NOT NULL,
        requests INTEGER NOT NULL DEFAULT 0,
        tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (key_id, kind, start)
      )`,
    ],
  },
  {
    // docs/admin.md "Config versions": every stored config is kept with who stored it and when,
    // so one can be put back. The config stored before this release becomes the first version.
    version: 14,
    name: "config_versions",
    sql: [
      `CREATE TABLE config_versions (
        id INTEGER PRIMARY KEY,
        body TEXT NOT NULL,
        saved_by TEXT NOT NULL,
        saved_at INTEGER NOT NULL,
        restored_from INTEGER
      )`,
      `INSERT INTO config_versions (body, saved_by, saved_at)
        SELECT body, 'stored', updated_at FROM config`,
    ],
  },
  {
    // docs/observability.md "Token usage": tokens the gateway estimated because no usage came.
    version: 15,
    name: "tokens_estimated",
    sql: [
      "ALTER TABLE requests ADD COLUMN tokens_estimated INTEGER NOT NULL DEFAULT 0",
      "ALTER TABLE attempts ADD COLUMN tokens_estimated INTEGER NOT NULL DEFAULT 0",
    ],
  },
  {
    // docs/design.md "Cooldown": the one probe of an upstream whose pause ended, claimed by
    // one instance of all those sharing the database.
    version: 16,
    name: "cooldown_probe",
    sql: ["ALTER TABLE cooldowns ADD COLUMN probe_until INTEGER"],
  },
  {
    // docs/interactions.md "Stored interactions": which upstream holds each interaction a key created,
    // so a later turn, get, cancel or delete goes to it on any instance. Bounded per key.
    version: 20,
    name: "interaction_homes",
    sql: [
      `CREATE TABLE interaction_homes (
        key_id TEXT NOT NULL,
        interaction_id TEXT NOT NULL,
        upstream TEXT NOT NULL,
        route TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (key_id, interaction_id)
      )`,
      "CREATE INDEX interaction_homes_age ON interaction_homes (key_id, created_at)",
    ],
  },
  {
    // docs/observability.md "Cache tokens": cache reads and writes per hop and per request, the
    // USD of the writes, and the warm upstream a session's hop left (its cache writes are what
    // the move cost). Numbered after the others in flight on history.
    version: 21,
    name: "cache_tokens",
    sql: [
      "ALTER TABLE requests ADD COLUMN cache_write_tokens INTEGER",
      "ALTER TABLE requests ADD COLUMN cache_write_1h_tokens INTEGER",
      "ALTER TABLE requests ADD COLUMN cache_write_usd REAL",
      "ALTER TABLE requests ADD COLUMN moved_from TEXT",
      "ALTER TABLE attempts ADD COLUMN cached_tokens INTEGER",
      "ALTER TABLE attempts ADD COLUMN cache_write_tokens INTEGER",
      "ALTER TABLE attempts ADD COLUMN cache_write_1h_tokens INTEGER",
      "ALTER TABLE attempts ADD COLUMN cache_write_usd REAL",
      "ALTER TABLE attempts ADD COLUMN moved_from TEXT",
    ],
  },
  {
    // docs/design.md "History": indexes only where an admin query reads them. Every request was
    // put in the outcome index, which only the `error` filters need (a `success` page walks
    // `requests_started`: most rows succeed), and in the session index with a NULL session;
    // both are now partial, so a plain successful request updates four indexes, not six.
    version: 22,
    name: "partial_history_indexes",
    sql: [
      "DROP INDEX IF EXISTS requests_outcome_started",
      "CREATE INDEX requests_errors ON requests (started_at, id) WHERE outcome = 'error'",
      "DROP INDEX IF EXISTS requests_session_started",
      `CREATE INDEX requests_session ON requests (session_id, started_at, id)
        WHERE session_id IS NOT NULL`,
    ],
  },
  {
    // docs/observability.md "Token usage": whether a row's tokens are the upstream's report, the
    // gateway's estimate, or an estimate standing in for a count the upstream got wrong.
    version: 23,
    name: "usage_source",
    sql: [
      "ALTER TABLE requests ADD COLUMN usage_source TEXT",
      "ALTER TABLE attempts ADD COLUMN usage_source TEXT",
    ],
  },
  {
    // docs/design.md "Continuation ids": which key each continuation id or token
    // was handed to, by its SHA-256 (a token is a credential to the decode it resumes: it is
    // not kept), and when its owner last named it, for the age and per-key bounds.
    version: 24,
    name: "continuation_owners",
    sql: [
      `CREATE TABLE continuation_owners (
        digest TEXT PRIMARY KEY NOT NULL,
        key_id TEXT NOT NULL,
        used_at INTEGER NOT NULL
      ) WITHOUT ROWID`,
      "CREATE INDEX continuation_owners_key ON continuation_owners (key_id, used_at)",
      "CREATE INDEX continuation_owners_age ON continuation_owners (used_at)",
    ],
  },
  {
    // docs/design.md "Cooldown": each member (an upstream with one model) has a cooldown of its
    // own beside its upstream's. A table of its own rather than a new key for `cooldowns`, whose
    // rows an instance of the release before keeps reading and writing while both run.
    version: 25,
    name: "member_cooldowns",
    sql: [
      `CREATE TABLE member_cooldowns (
        upstream TEXT NOT NULL,
        model TEXT NOT NULL,
        consecutive_failures INTEGER NOT NULL DEFAULT 0,
        pause_count INTEGER NOT NULL DEFAULT 0,
        paused_until INTEGER,
        reason TEXT,
        probe_until INTEGER,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (upstream, model)
      )`,
    ],
  },
  {
    // docs/design.md "Abort and disconnect": the fences an operator's abort leaves, so they hold
    // across restarts and reach every instance (docs/scaling.md "Fences"). `key_id` NULL: every
    // key (the admin token's session abort). `version` grows with each insert and lift, so an
    // instance reads what changed since its last read whatever the instances' clocks say.
    version: 26,
    name: "fences",
    sql: [
      `CREATE TABLE fences (
        id TEXT PRIMARY KEY NOT NULL,
        kind TEXT NOT NULL,
        key_id TEXT,
        session_id TEXT,
        fingerprint TEXT,
        request_id TEXT,
        instance_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        lifted_at INTEGER,
        version INTEGER NOT NULL
      )`,
      "CREATE INDEX fences_version ON fences (version)",
      "CREATE INDEX fences_key ON fences (key_id, expires_at)",
      "CREATE INDEX fences_expires ON fences (expires_at)",
    ],
  },
  {
    // docs/scaling.md "Rollups": per-minute sums of history kept by triggers with every row
    // write, so trends and cost reports read minutes, not rows; computed here for the rows
    // already stored. The history rows are untouched.
    version: 27,
    name: "history_rollups",
    sql: ROLLUP_MIGRATION,
  },
  {
    // docs/scaling.md "Session summaries": one row per key and session kept by triggers with
    // every request row write, so the admin Sessions panel reads the sessions active in its
    // window, not their rows; computed here for the rows already stored.
    version: 28,
    name: "session_summaries",
    sql: SESSION_SUMMARY_MIGRATION,
  },
  {
    // docs/mcp.md "History and metrics": a tool call through /mcp is a request row (client_format `mcp`,
    // route the tool's name as clients see it, upstream the replica, upstream_model the tool's
    // own name) with its server's id and the bytes of its message and answer.
    version: 29,
    name: "mcp_tool_calls",
    sql: [
      "ALTER TABLE requests ADD COLUMN tool_server TEXT",
      "ALTER TABLE requests ADD COLUMN bytes_in INTEGER",
      "ALTER TABLE requests ADD COLUMN bytes_out INTEGER",
    ],
  },
];
