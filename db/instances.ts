import { type Db, writing } from "./client.ts";
import { text } from "./row_values.ts";

export const INTERRUPTED_CODE = "gw.gateway.interrupted";
export const INTERRUPTED_MESSAGE = "gateway stopped before the request ended";

export interface CloseInterruptedOptions {
  /** This process; its own open rows are live by definition and never closed. */
  instanceId: string;
  now: number;
  /** An instance whose last heartbeat is at least this old is treated as gone. */
  staleAfterMs: number;
}

const UPSERT_INSTANCE = `INSERT INTO instances (id, started_at, heartbeat_at, url)
  VALUES (?, ?, ?, ?)
  ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,
    url = COALESCE(excluded.url, instances.url)`;

/**
 * Records this process as a live instance that owns the requests it opens;
 * `url` is where other instances reach it to forward an abort.
 */
export async function registerInstance(
  db: Db,
  id: string,
  opts: { now: number; url?: string },
): Promise<void> {
  const args = [id, opts.now, opts.now, opts.url ?? null];
  await writing(db, (client) => client.execute({ sql: UPSERT_INSTANCE, args }));
}

/** Keeps this instance live. An upsert, so a row pruned by someone else comes back. */
export async function heartbeat(db: Db, id: string, opts: { now: number }): Promise<void> {
  await registerInstance(db, id, opts);
}

/** Another live instance, and where to reach it. */
export interface Peer {
  instanceId: string;
  url: string;
}

const LIVE_PEERS = `SELECT id, url FROM instances
  WHERE id <> ? AND heartbeat_at > ? AND url IS NOT NULL ORDER BY id`;

/** The other instances that beat since `liveSince` and said where they listen. */
export async function livePeers(
  db: Db,
  opts: { self: string; liveSince: number },
): Promise<Peer[]> {
  const rows = await db.client.execute({ sql: LIVE_PEERS, args: [opts.self, opts.liveSince] });
  return rows.rows.map((row) => ({ instanceId: text(row, "id"), url: text(row, "url") }));
}

// The literal `state = 'open'` (not a bound parameter) lets SQLite use the partial index.
const OPEN_ROWS_OF_DEAD_INSTANCES = `SELECT id FROM requests
  WHERE state = 'open' AND instance_id <> ?
    AND instance_id NOT IN (SELECT id FROM instances WHERE heartbeat_at > ?)`;

const CLOSE_ATTEMPTS = `UPDATE attempts SET outcome = 'error', error_code = ?, error_message = ?
  WHERE outcome IS NULL AND request_id IN (${OPEN_ROWS_OF_DEAD_INSTANCES})`;

const CLOSE_REQUESTS = `UPDATE requests SET state = 'interrupted', outcome = 'error',
    failure_source = 'gateway', error_code = ?, error_message = ?, ended_at = ?
  WHERE id IN (${OPEN_ROWS_OF_DEAD_INSTANCES})`;

/**
 * Closes rows left `open` by instances that crashed (no recent heartbeat), as `interrupted`,
 * together with their unfinished hops. Returns the number of request rows closed. Safe to run
 * while other instances are live: their rows are left alone.
 */
export async function closeInterruptedRows(db: Db, opts: CloseInterruptedOptions): Promise<number> {
  const liveSince = opts.now - opts.staleAfterMs;
  const dead = [opts.instanceId, liveSince];
  // Attempts first: the request rows' `open` state is what finds them.
  const [, requests] = await writing(db, (client) =>
    client.batch([
      { sql: CLOSE_ATTEMPTS, args: [INTERRUPTED_CODE, INTERRUPTED_MESSAGE, ...dead] },
      { sql: CLOSE_REQUESTS, args: [INTERRUPTED_CODE, INTERRUPTED_MESSAGE, opts.now, ...dead] },
    ], "write"));
  return requests?.rowsAffected ?? 0;
}
