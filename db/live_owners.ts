import type { Db } from "./client.ts";
import { text } from "./row_values.ts";

/** A live instance that owns open requests, and where to reach it. */
export interface Owner {
  instanceId: string;
  url: string;
}

// `state = 'open'` as a literal so SQLite uses the partial index on open rows.
const OWNERS = `SELECT DISTINCT i.id AS instance_id, i.url AS url
  FROM requests r JOIN instances i ON i.id = r.instance_id
  WHERE r.state = 'open' AND i.id <> ? AND i.heartbeat_at > ? AND i.url IS NOT NULL`;

/** The other live instance running request `id`, if any. */
export async function findRequestOwner(
  db: Db,
  id: string,
  opts: { self: string; liveSince: number },
): Promise<Owner | null> {
  const rows = await db.client.execute({
    sql: `${OWNERS} AND r.id = ?`,
    args: [opts.self, opts.liveSince, id],
  });
  const row = rows.rows[0];
  return row ? { instanceId: text(row, "instance_id"), url: text(row, "url") } : null;
}

/** Other live instances running requests of session `sessionId`. */
export async function findSessionOwners(
  db: Db,
  sessionId: string,
  opts: { self: string; liveSince: number },
): Promise<Owner[]> {
  const rows = await db.client.execute({
    sql: `${OWNERS} AND r.session_id = ?`,
    args: [opts.self, opts.liveSince, sessionId],
  });
  return rows.rows.map((row) => ({ instanceId: text(row, "instance_id"), url: text(row, "url") }));
}
