import { type Db, writing } from "./client.ts";
import type { InStatement, Row } from "@libsql/client";
import { bind, num, numOrNull, text, textOrNull } from "./row_values.ts";

/**
 * Persisted cooldown state of one level (docs/design.md "Cooldown"), so a pause survives restart
 * and reaches every instance: an upstream as a whole (`model` null), or one member of it, the
 * upstream with one model.
 */
export interface CooldownRow {
  upstream: string;
  /** The member's model; null for the upstream as a whole. */
  model: string | null;
  consecutiveFailures: number;
  pauseCount: number;
  /** Epoch ms; null when not paused. */
  pausedUntil: number | null;
  reason: string | null;
  /** Epoch ms a half-open level's one probe may run until; null when none is out. */
  probeUntil: number | null;
  updatedAt: number;
}

type Level = Pick<CooldownRow, "upstream" | "model">;

const STATE = "consecutive_failures, pause_count, paused_until, reason, probe_until, updated_at";

/**
 * Where each level's rows are, as data. An upstream's own stay in `cooldowns`, keyed by its id as
 * before members had cooldowns, so an instance of an older release sharing the database keeps
 * reading and writing them; a member's are in `member_cooldowns` (migration 23), keyed by
 * upstream and model.
 */
const TABLES = {
  upstream: {
    table: "cooldowns",
    key: "upstream = ?",
    conflict: "upstream",
    columns: `upstream, NULL AS model, ${STATE}`,
    keyColumns: "upstream",
    keyArgs: (l: Level) => [l.upstream],
  },
  member: {
    table: "member_cooldowns",
    key: "upstream = ? AND model = ?",
    conflict: "upstream, model",
    columns: `upstream, model, ${STATE}`,
    keyColumns: "upstream, model",
    keyArgs: (l: Level) => [l.upstream, l.model],
  },
} as const;

function tableOf(level: Level) {
  return level.model === null ? TABLES.upstream : TABLES.member;
}

/** Every stored level: each upstream's own first, then its members' by model. */
export async function loadCooldowns(db: Db): Promise<CooldownRow[]> {
  const { upstream, member } = TABLES;
  const result = await db.client.execute(
    `SELECT ${upstream.columns} FROM ${upstream.table}
     UNION ALL SELECT ${member.columns} FROM ${member.table}
     ORDER BY upstream, model`,
  );
  return result.rows.map(cooldownRow);
}

function cooldownRow(row: Row): CooldownRow {
  return {
    upstream: text(row, "upstream"),
    model: textOrNull(row, "model"),
    consecutiveFailures: num(row, "consecutive_failures"),
    pauseCount: num(row, "pause_count"),
    pausedUntil: numOrNull(row, "paused_until"),
    reason: textOrNull(row, "reason"),
    probeUntil: numOrNull(row, "probe_until"),
    updatedAt: num(row, "updated_at"),
  };
}

/** Last write wins: instances sharing a server all see the most recent transition. */
export async function saveCooldown(db: Db, row: CooldownRow): Promise<void> {
  const t = tableOf(row);
  const sql = `INSERT INTO ${t.table} (${t.keyColumns}, ${STATE})
    VALUES (${t.keyArgs(row).map(() => "?").join(", ")}, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (${t.conflict}) DO UPDATE SET
      consecutive_failures = excluded.consecutive_failures,
      pause_count = excluded.pause_count,
      paused_until = excluded.paused_until,
      reason = excluded.reason,
      probe_until = excluded.probe_until,
      updated_at = excluded.updated_at`;
  const args = [
    ...t.keyArgs(row),
    row.consecutiveFailures,
    row.pauseCount,
    row.pausedUntil,
    row.reason,
    row.probeUntil,
    row.updatedAt,
  ].map(bind);
  await writing(db, (client) => client.execute({ sql, args }));
}

/**
 * For an upstream removed from the config, so its state (its own and its members') does not
 * linger in admin views.
 */
export async function deleteCooldown(db: Db, upstream: string): Promise<void> {
  const statements: InStatement[] = Object.values(TABLES).map((t) => ({
    sql: `DELETE FROM ${t.table} WHERE upstream = ?`,
    args: [upstream],
  }));
  await writing(db, (client) => client.batch(statements, "write"));
}

/**
 * Claims the probe of a level whose pause ended by `now`, until `until`: "claimed", or the
 * stored row that refused the claim (another instance's probe is out, or its state moved on).
 * A level with no stored row is "claimed": the database knows of no pause to share.
 * docs/design.md "Cooldown": one conditional write, so of all the instances sharing the
 * database exactly one gets it.
 */
export async function claimProbe(
  db: Db,
  probe: Level & { now: number; until: number },
): Promise<"claimed" | CooldownRow> {
  const t = tableOf(probe);
  const claim = `UPDATE ${t.table} SET probe_until = ?
    WHERE ${t.key} AND paused_until IS NOT NULL AND paused_until <= ?
      AND (probe_until IS NULL OR probe_until <= ?)`;
  const args = [probe.until, ...t.keyArgs(probe), probe.now, probe.now].map(bind);
  const claimed = await writing(db, (client) => client.execute({ sql: claim, args }));
  if (claimed.rowsAffected === 1) return "claimed";
  const stored = await db.client.execute({
    sql: `SELECT ${t.columns} FROM ${t.table} WHERE ${t.key}`,
    args: t.keyArgs(probe).map(bind),
  });
  const row = stored.rows[0];
  return row ? cooldownRow(row) : "claimed";
}

/** Gives back a probe that ended with no word on the level's health, if it is still ours. */
export async function releaseProbe(
  db: Db,
  probe: Level & { until: number },
): Promise<void> {
  const t = tableOf(probe);
  const sql = `UPDATE ${t.table} SET probe_until = NULL WHERE ${t.key} AND probe_until = ?`;
  const args = [...t.keyArgs(probe), probe.until].map(bind);
  await writing(db, (client) => client.execute({ sql, args }));
}
