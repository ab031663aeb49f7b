import type { Client, Config } from "@libsql/client";
import { localFilePath } from "./local_path.ts";

// Kept importable from here: callers open and name databases through one module.
export { localFilePath };

/**
 * Short on purpose: history writes run off the request path and retry later, so a locked
 * database must fail fast rather than hold a connection (or a caller) for seconds.
 */
export const DEFAULT_BUSY_TIMEOUT_MS = 200;

/** An open database. Every SQL statement of the project goes through `client`. */
export interface Db {
  readonly client: Client;
  readonly url: string;
  /** Idempotent, so shutdown paths need not know whether someone closed it first. */
  close(): void;
}

export interface OpenDatabaseOptions {
  authToken?: string;
  /** Busy timeout for local `file:` databases; remote servers ignore it. */
  busyTimeoutMs?: number;
}

/**
 * Opens a local (`file:`) or remote (`libsql:`, `http(s):`, `ws(s):`) database.
 * Schema is not touched here: call `migrate` next.
 */
export async function openDatabase(url: string, opts: OpenDatabaseOptions = {}): Promise<Db> {
  const localPath = localFilePath(url);
  if (localPath !== null) await ensureParentDir(localPath);
  // `timeout` rather than `PRAGMA busy_timeout`: the client pools connections, and a pragma
  // would only reach the one connection that happened to run it.
  const client = await clientFor(url, {
    url,
    authToken: opts.authToken,
    timeout: opts.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS,
  });
  try {
    if (localPath !== null) {
      // Free pages go back to the disk in small steps after retention removes rows
      // (docs/scaling.md "Retention"). Only a new file takes it here: SQLite applies it before
      // the first table is made, and before WAL mode is set; an older file needs one VACUUM
      // (db/auto_vacuum.ts).
      await client.execute("PRAGMA auto_vacuum=INCREMENTAL");
      // WAL lets the admin page read history while the writer holds the write lock.
      await client.execute("PRAGMA journal_mode=WAL");
    }
  } catch (err) {
    client.close();
    throw err;
  }
  return {
    client,
    url,
    close: () => {
      if (!client.closed) client.close();
    },
  };
}

/**
 * Runs a write on `db.client`. Every write of the project goes through here, because a local
 * write that fails with SQLITE_BUSY leaves its statement active on the pooled connection until
 * garbage collection (a libsql native binding quirk), and every later COMMIT on that connection
 * fails with "SQL statements in progress" — the writer would never recover from one lock.
 * Reopening the pool drops the poisoned connection. Only interactive transactions of this client
 * would be cut by that, and the project opens those only while migrating at start.
 */
export async function writing<T>(db: Db, write: (client: Client) => Promise<T>): Promise<T> {
  try {
    return await write(db.client);
  } catch (err) {
    if (db.client.protocol === "file" && !db.client.closed) void db.client.reconnect();
    throw err;
  }
}

/**
 * A local database needs the native driver (FFI); a remote one is reached through the client's
 * web entry point, plain `fetch` and WebSockets, so it also works where FFI is not available
 * (Deno Deploy). The native module is imported only when a local file is opened: importing it
 * loads the binding, which fails outright without FFI.
 */
async function clientFor(url: string, config: Config): Promise<Client> {
  if (url.startsWith("file:")) return (await import("@libsql/client")).createClient(config);
  return (await import("@libsql/client/web")).createClient(config);
}

async function ensureParentDir(path: string): Promise<void> {
  const cut = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  if (cut <= 0) return; // the working directory or the root, which exist
  await Deno.mkdir(path.slice(0, cut), { recursive: true });
}
