import type { Client } from "@libsql/client";
import type { Db } from "./client.ts";

/** Thrown by every statement of a gateway running without a database. */
export class NoDatabaseError extends Error {
  constructor(readonly why: string) {
    super(`no database: ${why}`);
    this.name = "NoDatabaseError";
  }
}

/**
 * Stands in for a database the platform cannot give (no FFI for a local file, no file system to
 * write, and no remote URL set): every statement fails with `NoDatabaseError`. The gateway then
 * runs as it does while a remote database is away: it serves, keeps history rows in the writer's
 * bounded queue, and says so on /readyz (docs/deploy.md).
 */
export function unavailableDatabase(url: string, why: string): Db {
  const fail = () => Promise.reject(new NoDatabaseError(why));
  let closed = false;
  const client: Client = {
    execute: fail,
    batch: fail,
    migrate: fail,
    transaction: fail,
    executeMultiple: fail,
    sync: fail,
    reconnect: () => {},
    close: () => void (closed = true),
    get closed() {
      return closed;
    },
    protocol: "none",
  } as unknown as Client;
  return { client, url, close: () => client.close() };
}
