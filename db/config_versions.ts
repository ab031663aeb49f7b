import type { InStatement } from "@libsql/client";
import { readerOf, type Reads } from "./read_db.ts";
import { num, numOrNull, text } from "./row_values.ts";

/**
 * Every config the gateway stored, newest last (docs/admin.md "Config versions"). A version is
 * written in the same batch as the config it records (db/config_store.ts), so the history never
 * misses a stored config nor holds one that was not stored.
 */

/** Who stored it: the admin API, the config file at start, the safe-mode repair, or (for the
 * config found when versions began to be kept) nobody known. */
export type ConfigAuthor = "admin" | "file" | "repair" | "stored";

export interface ConfigVersionInfo {
  id: number;
  savedBy: string;
  savedAt: number;
  /** The version this one put back (a rollback), or null. */
  restoredFrom: number | null;
  /** The newest version holding the config stored now. */
  current: boolean;
}

export interface ConfigVersion extends ConfigVersionInfo {
  /** The parsed JSON, or the raw text when it is not JSON. */
  body: unknown;
}

// Nothing is recorded when the body is the latest version's: a save that changes nothing, or a
// gateway restarted with the same config file, adds no version.
const INSERT_VERSION = `INSERT INTO config_versions (body, saved_by, saved_at, restored_from)
  SELECT ?, ?, ?, ? WHERE NOT EXISTS (
    SELECT 1 FROM config_versions
    WHERE id = (SELECT MAX(id) FROM config_versions) AND body = ?
  )`;

export function configVersionStatement(
  body: string,
  opts: { by: ConfigAuthor; at: number; restoredFrom?: number },
): InStatement {
  return { sql: INSERT_VERSION, args: [body, opts.by, opts.at, opts.restoredFrom ?? null, body] };
}

// The newest version holding the stored body is the one in force (an older copy is not).
const COLUMNS = `id, saved_by, saved_at, restored_from,
  id IS (SELECT MAX(id) FROM config_versions
    WHERE body = (SELECT body FROM config WHERE id = 1)) AS current`;

/** Newest first. */
export async function listConfigVersions(
  db: Reads,
  opts: { limit: number },
): Promise<ConfigVersionInfo[]> {
  const result = await readerOf(db).execute({
    sql: `SELECT ${COLUMNS} FROM config_versions ORDER BY id DESC LIMIT ?`,
    args: [opts.limit],
  });
  return result.rows.map(info);
}

export async function getConfigVersion(db: Reads, id: number): Promise<ConfigVersion | null> {
  const result = await readerOf(db).execute({
    sql: `SELECT ${COLUMNS}, body FROM config_versions WHERE id = ?`,
    args: [id],
  });
  const row = result.rows[0];
  if (row === undefined) return null;
  const stored = text(row, "body");
  let body: unknown = stored;
  try {
    body = JSON.parse(stored);
  } catch {
    // not JSON: shown as the text it is
  }
  return { ...info(row), body };
}

function info(row: Parameters<typeof text>[0]): ConfigVersionInfo {
  return {
    id: num(row, "id"),
    savedBy: text(row, "saved_by"),
    savedAt: num(row, "saved_at"),
    restoredFrom: numOrNull(row, "restored_from"),
    current: num(row, "current") === 1,
  };
}
