import { type Db, writing } from "./client.ts";
import { bind, num, numOrNull, text, textOrNull } from "./row_values.ts";

/** Persisted cooldown state of one upstream (docs/design.md "Failover before content"), so a pause survives restart. */
export interface CooldownRow {
  upstream: string;
  consecutiveFailures: number;
  pauseCount: number;
  /** Epoch ms; null when not paused. */
  pausedUntil: number | null;
  reason: string | null;
  updatedAt: number;
}

export async function loadCooldowns(db: Db): Promise<CooldownRow[]> {
  const result = await db.client.execute(
    `SELECT upstream, consecutive_failures, pause_count, paused_until, reason, updated_at
      FROM cooldowns ORDER BY upstream`,
  );
  return result.rows.map((row) => ({
    upstream: text(row, "upstream"),
    consecutiveFailures: num(row, "consecutive_failures"),
    pauseCount: num(row, "pause_count"),
    pausedUntil: numOrNull(row, "paused_until"),
    reason: textOrNull(row, "reason"),
    updatedAt: num(row, "updated_at"),
  }));
}

const UPSERT_COOLDOWN = `INSERT INTO cooldowns
    (upstream, consecutive_failures, pause_count, paused_until, reason, updated_at)
  VALUES (?, ?, ?, ?, ?, ?)
  ON CONFLICT (upstream) DO UPDATE SET
    consecutive_failures = excluded.consecutive_failures,
    pause_count = excluded.pause_count,
    paused_until = excluded.paused_until,
    reason = excluded.reason,
    updated_at = excluded.updated_at`;

/** Last write wins: instances sharing a server all see the most recent transition. */
export async function saveCooldown(db: Db, row: CooldownRow): Promise<void> {
  const args = [
    row.upstream,
    row.consecutiveFailures,
    row.pauseCount,
    row.pausedUntil,
    row.reason,
    row.updatedAt,
  ]
    .map(bind);
  await writing(db, (client) => client.execute({ sql: UPSERT_COOLDOWN, args }));
}

/** For an upstream removed from the config, so its state does not linger in admin views. */
export async function deleteCooldown(db: Db, upstream: string): Promise<void> {
  const sql = "DELETE FROM cooldowns WHERE upstream = ?";
  await writing(db, (client) => client.execute({ sql, args: [upstream] }));
}
