import { type Db, writing } from "./client.ts";
import { text } from "./row_values.ts";

/**
 * Where an interaction a key created is stored (docs/interactions.md "Stored interactions"): the
 * upstream that holds it, and the route it was created on. Shared by every instance on the
 * database. A key's rows are its own: another key's id is not found.
 */
export interface InteractionHomeRow {
  /** The gateway key, or "" for an open gateway (no keys). */
  keyId: string;
  interactionId: string;
  upstream: string;
  route: string;
  createdAt: number;
}

const UPSERT = `INSERT INTO interaction_homes (key_id, interaction_id, upstream, route, created_at)
  VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (key_id, interaction_id) DO UPDATE SET
    upstream = excluded.upstream, route = excluded.route, created_at = excluded.created_at`;

/** Drops a key's rows beyond its newest `keep` (the one `keep` places down and all older). */
const PRUNE = `DELETE FROM interaction_homes WHERE key_id = ? AND created_at <= (
  SELECT created_at FROM interaction_homes WHERE key_id = ?
  ORDER BY created_at DESC LIMIT 1 OFFSET ?)`;

export async function saveInteractionHome(
  db: Db,
  row: InteractionHomeRow,
  opts: { pruneTo?: number } = {},
): Promise<void> {
  const args = [row.keyId, row.interactionId, row.upstream, row.route, row.createdAt];
  await writing(db, async (client) => {
    await client.execute({ sql: UPSERT, args });
    if (opts.pruneTo !== undefined) {
      await client.execute({ sql: PRUNE, args: [row.keyId, row.keyId, opts.pruneTo] });
    }
  });
}

export async function findInteractionHome(
  db: Db,
  key: { keyId: string; interactionId: string },
): Promise<{ upstream: string; route: string } | null> {
  const result = await db.client.execute({
    sql: `SELECT upstream, route FROM interaction_homes
      WHERE key_id = ? AND interaction_id = ? LIMIT 1`,
    args: [key.keyId, key.interactionId],
  });
  const row = result.rows[0];
  return row ? { upstream: text(row, "upstream"), route: text(row, "route") } : null;
}

export async function deleteInteractionHome(
  db: Db,
  key: { keyId: string; interactionId: string },
): Promise<void> {
  await writing(db, (client) =>
    client.execute({
      sql: "DELETE FROM interaction_homes WHERE key_id = ? AND interaction_id = ?",
      args: [key.keyId, key.interactionId],
    }));
}

/** How many rows a key has (tests and the bound's check). */
export async function countInteractionHomes(db: Db, keyId: string): Promise<number> {
  const result = await db.client.execute({
    sql: "SELECT COUNT(*) AS n FROM interaction_homes WHERE key_id = ?",
    args: [keyId],
  });
  return Number(result.rows[0]?.n ?? 0);
}
