import type { InStatement } from "@libsql/client";
import { type Db, writing } from "./client.ts";
import { type ConfigAuthor, configVersionStatement } from "./config_versions.ts";
import { num, text } from "./row_values.ts";

export interface StoredConfig {
  /** The parsed JSON, or the raw text when it is not JSON (safe mode shows it for repair). */
  body: unknown;
  updatedAt: number;
  /** Raised by one at every store: 1 for the first config stored in a database. */
  version: number;
}

export async function loadStoredConfig(db: Db): Promise<StoredConfig | null> {
  const result = await db.client.execute(
    "SELECT body, updated_at, version FROM config WHERE id = 1",
  );
  const row = result.rows[0];
  if (row === undefined) return null;
  return {
    body: parseOrRaw(text(row, "body")),
    updatedAt: num(row, "updated_at"),
    version: num(row, "version"),
  };
}

/** The stored config's version alone (one small read per heartbeat); null when none is stored. */
export async function storedConfigVersion(db: Db): Promise<number | null> {
  const result = await db.client.execute("SELECT version FROM config WHERE id = 1");
  const row = result.rows[0];
  return row === undefined ? null : num(row, "version");
}

// The version is raised inside the one statement, so two instances saving at once get two
// versions and every instance ends on the last body written.
const UPSERT_CONFIG = `INSERT INTO config (id, body, updated_at, version) VALUES (1, ?, ?, 1)
  ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at,
    version = config.version + 1
  RETURNING version`;

/**
 * Stores the config that runs and returns its new version. A string body is stored verbatim (the
 * operator's text, even when it is not valid JSON); anything else is stored as JSON.
 */
export async function storeConfig(
  db: Db,
  body: unknown,
  opts: { now: number; by?: ConfigAuthor; restoredFrom?: number },
): Promise<number> {
  const stored = serialise(body);
  const statements: InStatement[] = [{ sql: UPSERT_CONFIG, args: [stored, opts.now] }];
  // `by`: kept as a version too, in the same batch (db/config_versions.ts).
  if (opts.by) {
    statements.push(configVersionStatement(stored, { ...opts, by: opts.by, at: opts.now }));
  }
  const [upsert] = await writing(db, (client) => client.batch(statements, "write"));
  const row = upsert?.rows[0];
  if (row === undefined) throw new Error("storing the config returned no version");
  return num(row, "version");
}

function serialise(body: unknown): string {
  if (typeof body === "string") return body;
  const json = JSON.stringify(body);
  if (json === undefined) throw new TypeError(`config of type ${typeof body} cannot be stored`);
  return json;
}

function parseOrRaw(stored: string): unknown {
  try {
    return JSON.parse(stored);
  } catch {
    return stored; // not JSON: hand the text to safe mode as it is
  }
}
