import { type Db, writing } from "./client.ts";
import type { Row } from "@libsql/client";
import { bind, num, numOrNull, text, textOrNull } from "./row_values.ts";

/** Persisted cooldown state of one upstream (docs/design.md "Failover before content"), so a pause survives restart. */
export interface CooldownRow {
  upstream: string;
  consecutiveFailures: number;
  pauseCount: number;
  /** Epoch ms; null when not paused. */
  pausedUntil: number | null;
  reason: string | null;
  /** Epoch ms a half-open upstream's one probe may run until; null when none is out. */
  probeUntil: number | null;
  updatedAt: number;
}

export async function loadCooldowns(db: Db): Promise<CooldownRow[]> {
  const result = await db.client.execute(
    `SELECT ${COLUMNS} FROM cooldowns ORDER BY upstream`,
  );
  return result.rows.map(cooldownRow);
}

const COLUMNS =
  "upstream, consecutive_failures, pause_count, paused_until, reason, probe_until, updated_at";

function cooldownRow(row: Row): CooldownRow {
  return {
    upstream: text(row, "upstream"),
    consecutiveFailures: num(row, "consecutive_failures"),
    pauseCount: num(row, "pause_count"),
    pausedUntil: numOrNull(row, "paused_until"),
    reason: textOrNull(row, "reason"),
    probeUntil: numOrNull(row, "probe_until"),
    updatedAt: num(row, "updated_at"),
  };
}

const UPSERT_COOLDOWN = `INSERT INTO cooldowns
    (upstream, consecutive_failures, pause_count, paused_until, reason, probe_until, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (upstream) DO UPDATE SET
    consecutive_failures = excluded.consecutive_failures,
    pause_count = excluded.pause_count,
    paused_until = excluded.paused_until,
    reason = excluded.reason,
    probe_until = excluded.probe_until,
    updated_at = excluded.updated_at`;

/** Last write wins: instances sharing a server all see the most recent transition. */
export async function saveCooldown(db: Db, row: CooldownRow): Promise<void> {
  const args = [
    row.upstream,
    row.consecutiveFailures,
    row.pauseCount,
    row.pausedUntil,
    row.reason,
    row.probeUntil,
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

// docs/design.md "Cooldown": the probe of a half-open upstream is taken in one conditional
// write, so of all the instances sharing the database exactly one gets it.
const CLAIM_PROBE = `UPDATE cooldowns SET probe_until = ?
  WHERE upstream = ? AND paused_until IS NOT NULL AND paused_until <= ?
    AND (probe_until IS NULL OR probe_until <= ?)`;

/**
 * Claims the probe of `upstream`, whose pause ended by `now`, until `until`: "claimed", or the
 * stored row that refused the claim (another instance's probe is out, or its state moved on).
 * An upstream with no stored row is "claimed": the database knows of no pause to share.
 */
export async function claimProbe(
  db: Db,
  probe: { upstream: string; now: number; until: number },
): Promise<"claimed" | CooldownRow> {
  const args = [probe.until, probe.upstream, probe.now, probe.now];
  const claimed = await writing(db, (client) => client.execute({ sql: CLAIM_PROBE, args }));
  if (claimed.rowsAffected === 1) return "claimed";
  const stored = await db.client.execute({
    sql: `SELECT ${COLUMNS} FROM cooldowns WHERE upstream = ?`,
    args: [probe.upstream],
  });
  const row = stored.rows[0];
  return row ? cooldownRow(row) : "claimed";
}

/** Gives back a probe that ended with no word on the upstream's health, if it is still ours. */
export async function releaseProbe(
  db: Db,
  probe: { upstream: string; until: number },
): Promise<void> {
  const sql = "UPDATE cooldowns SET probe_until = NULL WHERE upstream = ? AND probe_until = ?";
  await writing(db, (client) => client.execute({ sql, args: [probe.upstream, probe.until] }));
}
