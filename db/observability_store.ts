import { type Db, writing } from "./client.ts";
import { text } from "./row_values.ts";

/** The stored guardrails document (validated by the caller), or null when never set. */
export async function loadGuardrails(db: Db): Promise<unknown> {
  const result = await db.client.execute("SELECT body FROM guardrails WHERE id = 1");
  const row = result.rows[0];
  return row ? JSON.parse(text(row, "body")) : null;
}

export async function storeGuardrails(db: Db, body: unknown, opts: { now: number }): Promise<void> {
  await writing(db, (client) =>
    client.execute({
      sql: `INSERT INTO guardrails (id, body, updated_at) VALUES (1, ?, ?)
        ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at`,
      args: [JSON.stringify(body), opts.now],
    }));
}

/** Every stored destination document, oldest first. */
export async function listDestinations(db: Db): Promise<unknown[]> {
  const result = await db.client.execute("SELECT body FROM destinations ORDER BY created_at, id");
  return result.rows.map((row) => JSON.parse(text(row, "body")));
}

export async function upsertDestination(
  db: Db,
  id: string,
  opts: { body: unknown; now: number },
): Promise<void> {
  await writing(db, (client) =>
    client.execute({
      sql: `INSERT INTO destinations (id, body, created_at, updated_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at`,
      args: [id, JSON.stringify(opts.body), opts.now, opts.now],
    }));
}

/** True when a destination was there to delete. */
export async function deleteDestination(db: Db, id: string): Promise<boolean> {
  const result = await writing(
    db,
    (client) => client.execute({ sql: "DELETE FROM destinations WHERE id = ?", args: [id] }),
  );
  return result.rowsAffected > 0;
}
