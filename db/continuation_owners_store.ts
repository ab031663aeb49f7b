import type { InStatement } from "@libsql/client";
import { type Db, writing } from "./client.ts";
import { num, text } from "./row_values.ts";

/**
 * Which gateway key each continuation id or token was handed to (docs/design.md "Continuation
 * ids"), by the handle's digest, shared by every instance on the database.
 */
export interface ContinuationOwner {
  keyId: string;
  /** When the owner last received or named it (ms since the epoch). */
  usedAt: number;
}

/**
 * The first key a digest is bound to keeps it: another key's binding of the same digest is
 * ignored, and the owner's refreshes its `used_at`.
 */
const BIND = `INSERT INTO continuation_owners (digest, key_id, used_at) VALUES (?, ?, ?)
  ON CONFLICT (digest) DO UPDATE SET used_at = excluded.used_at
  WHERE continuation_owners.key_id = excluded.key_id`;

/** Drops a key's bindings beyond its newest `keep` (the one `keep` places down and all older). */
const PRUNE_KEY = `DELETE FROM continuation_owners WHERE key_id = ? AND used_at <= (
  SELECT used_at FROM continuation_owners WHERE key_id = ?
  ORDER BY used_at DESC LIMIT 1 OFFSET ?)`;

const PRUNE_AGE = "DELETE FROM continuation_owners WHERE used_at < ?";

/**
 * Binds `digests` to `keyId` in one write; `prune` then drops the key's bindings beyond its
 * newest `perKey` and every binding last used before `before`.
 */
export async function bindContinuationOwners(
  db: Db,
  owner: ContinuationOwner & { digests: readonly string[] },
  opts: { prune?: { perKey: number; before: number } } = {},
): Promise<void> {
  const statements: InStatement[] = owner.digests.map((digest) => ({
    sql: BIND,
    args: [digest, owner.keyId, owner.usedAt],
  }));
  if (opts.prune) {
    statements.push(
      { sql: PRUNE_KEY, args: [owner.keyId, owner.keyId, opts.prune.perKey] },
      { sql: PRUNE_AGE, args: [opts.prune.before] },
    );
  }
  if (!statements.length) return;
  await writing(db, (client) => client.batch(statements, "write"));
}

export async function findContinuationOwner(
  db: Db,
  digest: string,
): Promise<ContinuationOwner | null> {
  const result = await db.client.execute({
    sql: "SELECT key_id, used_at FROM continuation_owners WHERE digest = ? LIMIT 1",
    args: [digest],
  });
  const row = result.rows[0];
  return row ? { keyId: text(row, "key_id"), usedAt: num(row, "used_at") } : null;
}

/** How many bindings a key has, or all keys together (tests and the bounds' checks). */
export async function countContinuationOwners(db: Db, keyId?: string): Promise<number> {
  const result = await db.client.execute(
    keyId === undefined
      ? "SELECT COUNT(*) AS n FROM continuation_owners"
      : { sql: "SELECT COUNT(*) AS n FROM continuation_owners WHERE key_id = ?", args: [keyId] },
  );
  return Number(result.rows[0]?.n ?? 0);
}
