import assert from "node:assert/strict";
import { localFilePath, openDatabase } from "./client.ts";
import { getRequest } from "./history_queries.ts";
import { HistoryWriter } from "./history_writer.ts";
import { migrate } from "./migrate.ts";
import { type Migration, MIGRATIONS } from "./migrations.ts";
import { manualTimers, requestRecord, withTempDb } from "../tests/db_helpers.ts";

/** The version a new, test-only migration gets: one past the last shipped one. */
const LATEST = MIGRATIONS.at(-1)!.version;
const NEXT = LATEST + 1;

Deno.test("openDatabase creates the parent directory and switches to WAL", async () => {
  await withTempDb(async ({ db, dir }) => {
    const stat = await Deno.stat(`${dir}/nested/pulsegate.db`);
    assert.ok(stat.isFile);
    const mode = await db.client.execute("PRAGMA journal_mode");
    assert.equal(mode.rows[0]?.[0], "wal");
  });
});

Deno.test("localFilePath reads the forms of file: URL libsql accepts", () => {
  assert.equal(localFilePath("file:data/pulsegate.db"), "data/pulsegate.db");
  assert.equal(localFilePath("file:/var/lib/pg.db"), "/var/lib/pg.db");
  assert.equal(localFilePath("file:///var/lib/pg.db"), "/var/lib/pg.db");
  assert.equal(localFilePath("file://localhost/var/lib/pg.db?mode=rw"), "/var/lib/pg.db");
  assert.equal(localFilePath("file:my%20dir/pg.db"), "my dir/pg.db");
  assert.equal(localFilePath("file::memory:"), null);
  assert.equal(localFilePath("libsql://db.example.turso.io"), null);
});

Deno.test("migrate is idempotent and records each version", async () => {
  await withTempDb(async ({ db }) => {
    const again = await migrate(db);
    assert.deepEqual(again, { applied: [], version: LATEST });
    const rows = await db.client.execute("SELECT version, name FROM schema_version");
    assert.deepEqual(
      rows.rows.map((row) => [row.version, row.name]),
      MIGRATIONS.map((m) => [m.version, m.name]),
    );
  });
});

Deno.test("a fresh database gets every shipped migration", async () => {
  const dir = await Deno.makeTempDir();
  const db = await openDatabase(`file:${dir}/fresh.db`);
  try {
    const result = await migrate(db);
    assert.deepEqual(result.applied, MIGRATIONS.map((m) => m.version));
    const tables = await db.client.execute(
      "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    );
    assert.deepEqual(tables.rows.map((row) => row.name), [
      "attempts",
      "config",
      "config_versions",
      "continuation_owners",
      "cooldowns",
      "destinations",
      "fences",
      "guardrails",
      "instances",
      "interaction_homes",
      "key_usage",
      "member_cooldowns",
      "requests",
      "rollup_hops",
      "rollup_requests",
      "schema_version",
      "session_summaries",
    ]);
  } finally {
    db.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an upgrade applies only the new migrations and keeps history", async () => {
  await withTempDb(async ({ db }) => {
    const writer = new HistoryWriter(db, manualTimers);
    writer.writeRequest(requestRecord({ id: "kept", state: "closed", outcome: "success" }));
    assert.equal(await writer.close(), true);

    const next: Migration = {
      version: NEXT,
      name: "add_request_note",
      sql: [
        "ALTER TABLE requests ADD COLUMN note TEXT",
        "CREATE INDEX requests_note ON requests (note)",
      ],
    };
    const result = await migrate(db, { migrations: [...MIGRATIONS, next], now: () => 42 });
    assert.deepEqual(result, { applied: [NEXT], version: NEXT });

    const kept = await getRequest(db, "kept");
    assert.equal(kept?.outcome, "success");
    const recorded = await db.client.execute(
      `SELECT applied_at FROM schema_version WHERE version = ${NEXT}`,
    );
    assert.equal(recorded.rows[0]?.applied_at, 42);
    // An older build against the upgraded database applies nothing and reports the real version.
    assert.deepEqual(await migrate(db), { applied: [], version: NEXT });
  });
});

Deno.test("a failing migration leaves no trace and is retried next start", async () => {
  await withTempDb(async ({ db }) => {
    const broken: Migration = {
      version: NEXT,
      name: "broken",
      sql: ["CREATE TABLE half_done (a TEXT)", "THIS IS NOT SQL"],
    };
    await assert.rejects(migrate(db, { migrations: [...MIGRATIONS, broken] }));
    const half = await db.client.execute(
      "SELECT name FROM sqlite_master WHERE name = 'half_done'",
    );
    assert.equal(half.rows.length, 0);
    const versions = await db.client.execute("SELECT MAX(version) AS v FROM schema_version");
    assert.equal(versions.rows[0]?.v, LATEST);
    const fixed = { ...broken, sql: ["CREATE TABLE half_done (a TEXT)"] };
    assert.deepEqual(await migrate(db, { migrations: [...MIGRATIONS, fixed] }), {
      applied: [NEXT],
      version: NEXT,
    });
  });
});

Deno.test("migrations out of order are refused before touching the database", async () => {
  await withTempDb(async ({ db }) => {
    const twice = [...MIGRATIONS, { version: 1, name: "again", sql: [] }];
    await assert.rejects(migrate(db, { migrations: twice }), /out of order/);
  });
});

Deno.test("shipped migrations never drop or delete history", () => {
  for (const migration of MIGRATIONS) {
    for (const sql of migration.sql) {
      assert.doesNotMatch(sql, /\b(DROP\s+TABLE|DELETE\s+FROM|DROP\s+COLUMN)\b/i, migration.name);
    }
  }
});
