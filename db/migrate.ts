import { REAL_TIME } from "../gateway/runtime/clock.ts";
import type { Client } from "@libsql/client";
import { type Db, writing } from "./client.ts";
import { type Migration, MIGRATIONS } from "./migrations.ts";
import { num } from "./row_values.ts";

export interface MigrateOptions {
  /** Defaults to the shipped list; tests pass older or newer lists to simulate upgrades. */
  migrations?: readonly Migration[];
  now?: () => number;
}

export interface MigrateResult {
  /** Versions applied by this call, in order. */
  applied: number[];
  /** Highest version the database is at now (may exceed the code's if a newer release ran). */
  version: number;
}

const CREATE_VERSION_TABLE = `CREATE TABLE IF NOT EXISTS schema_version (
  version INTEGER PRIMARY KEY NOT NULL,
  name TEXT NOT NULL,
  applied_at INTEGER NOT NULL
)`;

/** Applies every pending migration, each in its own write transaction. */
export async function migrate(db: Db, opts: MigrateOptions = {}): Promise<MigrateResult> {
  const migrations = checkedOrder(opts.migrations ?? MIGRATIONS);
  const now = opts.now ?? REAL_TIME.now;
  await writing(db, (client) => client.execute(CREATE_VERSION_TABLE));
  const done = await appliedVersions(db);
  const applied: number[] = [];
  for (const migration of migrations) {
    if (done.has(migration.version)) continue;
    const appliedAt = now();
    if (await writing(db, (client) => applyOne(client, { migration, appliedAt }))) {
      applied.push(migration.version);
    }
  }
  return { applied, version: Math.max(0, ...done, ...applied) };
}

async function appliedVersions(db: Db): Promise<Set<number>> {
  const result = await db.client.execute("SELECT version FROM schema_version");
  return new Set(result.rows.map((row) => num(row, "version")));
}

/** False when another instance sharing the database applied it first. */
async function applyOne(
  client: Client,
  { migration, appliedAt }: { migration: Migration; appliedAt: number },
): Promise<boolean> {
  const tx = await client.transaction("write");
  try {
    // Re-checked under the write lock: two instances may start against one server together.
    const seen = await tx.execute({
      sql: "SELECT 1 FROM schema_version WHERE version = ?",
      args: [migration.version],
    });
    if (seen.rows.length > 0) return false;
    for (const sql of migration.sql) await tx.execute(sql);
    await tx.execute({
      sql: "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
      args: [migration.version, migration.name, appliedAt],
    });
    await tx.commit();
    return true;
  } finally {
    tx.close(); // rolls back unless committed
  }
}

function checkedOrder(migrations: readonly Migration[]): readonly Migration[] {
  let previous = 0;
  for (const { version, name } of migrations) {
    if (!Number.isInteger(version) || version <= previous) {
      throw new Error(`migration ${version} (${name}) is out of order after ${previous}`);
    }
    previous = version;
  }
  return migrations;
}
