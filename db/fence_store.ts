import type { InStatement, Row } from "@libsql/client";
import { type Db, writing } from "./client.ts";
import { memberOrNull, num, numOrNull, text, textOrNull } from "./row_values.ts";

/**
 * What an operator's abort leaves behind (docs/design.md "Abort and disconnect"): a session
 * fence refuses the session's new requests, a turn fence the retry of the aborted turn, until
 * `expiresAt` or a lift. Stored (migration "fences") so it holds across restarts and instances.
 */
export interface FenceRow {
  id: string;
  kind: FenceKind;
  /** The key whose requests it refuses; null: every key's (the admin token's session abort). */
  keyId: string | null;
  /** The session it refuses (a turn fence of a request without one has null). */
  sessionId: string | null;
  /** A turn fence's conversation (gateway/formats/turn_fingerprint.ts); null for a session's. */
  fingerprint: string | null;
  /** The aborted request a turn fence came from; null for a session fence. */
  requestId: string | null;
  /** The instance that made it. */
  instanceId: string;
  createdAt: number;
  expiresAt: number;
  liftedAt: number | null;
}

export type FenceKind = "session" | "turn";

const KINDS: Record<FenceKind, true> = { session: true, turn: true };

const COLUMNS = "id, kind, key_id, session_id, fingerprint, request_id, instance_id, " +
  "created_at, expires_at, lifted_at";

/** Every insert and lift takes the next version: what an instance reads next is above it. */
const NEXT_VERSION = "(SELECT COALESCE(MAX(version), 0) + 1 FROM fences)";

/** The bounds the store keeps while it writes: active fences per key and in all. */
export interface FenceBounds {
  perKey: number;
  total: number;
  /** How long a lifted or expired row stays, so every instance reads the lift (ms). */
  retainMs: number;
}

/**
 * Stores a new fence, lifting any older one of the same scope, then keeps the bounds: beyond `perKey` active fences of its key, or
 * `total` in all, the ones expiring first are lifted (so other instances read them go), and
 * rows lifted or expired more than `retainMs` ago are deleted. One transaction.
 */
export async function saveFence(
  db: Db,
  fence: FenceRow,
  opts: { now: number; bounds: FenceBounds },
): Promise<void> {
  const { now, bounds } = opts;
  const statements: InStatement[] = [{
    sql: `INSERT INTO fences (${COLUMNS}, version)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ${NEXT_VERSION})`,
    args: [
      fence.id,
      fence.kind,
      fence.keyId,
      fence.sessionId,
      fence.fingerprint,
      fence.requestId,
      fence.instanceId,
      fence.createdAt,
      fence.expiresAt,
      fence.liftedAt,
    ],
  }];
  // A second abort of the same scope renews its fence: the older one is lifted, so one lift
  // undoes the fence (`IS`: NULL-safe equality).
  statements.push({
    sql: `UPDATE fences SET lifted_at = ?, version = ${NEXT_VERSION}
      WHERE kind = ? AND key_id IS ? AND session_id IS ? AND fingerprint IS ? AND id <> ?
        AND lifted_at IS NULL AND created_at <= ?`,
    args: [
      now,
      fence.kind,
      fence.keyId,
      fence.sessionId,
      fence.fingerprint,
      fence.id,
      fence.createdAt,
    ],
  });
  if (fence.keyId !== null) {
    statements.push({
      sql: `UPDATE fences SET lifted_at = ?, version = ${NEXT_VERSION}
        WHERE id IN (SELECT id FROM fences
          WHERE key_id = ? AND lifted_at IS NULL AND expires_at > ?
          ORDER BY expires_at DESC, created_at DESC, id DESC LIMIT -1 OFFSET ?)`,
      args: [now, fence.keyId, now, bounds.perKey],
    });
  }
  statements.push(
    {
      sql: `UPDATE fences SET lifted_at = ?, version = ${NEXT_VERSION}
        WHERE id IN (SELECT id FROM fences WHERE lifted_at IS NULL AND expires_at > ?
          ORDER BY expires_at DESC, created_at DESC, id DESC LIMIT -1 OFFSET ?)`,
      args: [now, now, bounds.total],
    },
    {
      sql: "DELETE FROM fences WHERE expires_at <= ? OR lifted_at <= ?",
      args: [now - bounds.retainMs, now - bounds.retainMs],
    },
  );
  await writing(db, (client) => client.batch(statements, "write"));
}

/** Lifts an active fence; false when there is none of that id (unknown, expired or lifted). */
export async function liftFence(db: Db, id: string, opts: { now: number }): Promise<boolean> {
  const result = await writing(db, (client) =>
    client.execute({
      sql: `UPDATE fences SET lifted_at = ?, version = ${NEXT_VERSION}
        WHERE id = ? AND lifted_at IS NULL AND expires_at > ?`,
      args: [opts.now, id, opts.now],
    }));
  return result.rowsAffected > 0;
}

/** The fences still in force at `now`, and the version they were read at. */
export async function activeFences(
  db: Db,
  opts: { now: number },
): Promise<{ fences: FenceRow[]; version: number }> {
  const [active, version] = await db.client.batch([
    {
      sql: `SELECT ${COLUMNS} FROM fences WHERE lifted_at IS NULL AND expires_at > ?
        ORDER BY expires_at DESC LIMIT ?`,
      args: [opts.now, READ_LIMIT],
    },
    "SELECT COALESCE(MAX(version), 0) AS version FROM fences",
  ], "read");
  return { fences: active!.rows.map(fenceRow), version: num(version!.rows[0]!, "version") };
}

/** At most this many rows per read; a reader that got as many reads again from there. */
const READ_LIMIT = 10_000;

/**
 * The fences made or lifted since `version` (docs/scaling.md "Fences"), in order, with the
 * version the reader is at after them. Cheap: an index range, empty most of the time.
 */
export async function fencesSince(
  db: Db,
  version: number,
): Promise<{ fences: FenceRow[]; version: number; more: boolean }> {
  const result = await db.client.execute({
    sql: `SELECT ${COLUMNS}, version FROM fences WHERE version > ? ORDER BY version LIMIT ?`,
    args: [version, READ_LIMIT],
  });
  const rows = result.rows;
  const last = rows.at(-1);
  return {
    fences: rows.map(fenceRow),
    version: last ? num(last, "version") : version,
    more: rows.length === READ_LIMIT,
  };
}

function fenceRow(row: Row): FenceRow {
  return {
    id: text(row, "id"),
    kind: memberOrNull(row, { column: "kind", members: KINDS }) ?? "session",
    keyId: textOrNull(row, "key_id"),
    sessionId: textOrNull(row, "session_id"),
    fingerprint: textOrNull(row, "fingerprint"),
    requestId: textOrNull(row, "request_id"),
    instanceId: text(row, "instance_id"),
    createdAt: num(row, "created_at"),
    expiresAt: num(row, "expires_at"),
    liftedAt: numOrNull(row, "lifted_at"),
  };
}
