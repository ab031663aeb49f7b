import { isLoopback } from "../runtime/loopback.ts";
import { withoutTrailingSlashes } from "../config/trailing_slashes.ts";
import { ADMIN_QUERY_BOUND_MS } from "../../db/worker_reads.ts";

/** Settings from the environment (docs/design.md "Settings"). Secrets are read here and go nowhere else. */
export interface Settings {
  host: string;
  port: number;
  configPath: string | null;
  dbUrl: string;
  dbAuthToken: string | undefined;
  adminToken: string | undefined;
  timeScale: number;
  /** Serve /metrics without the admin token (honoured on loopback only, for a local scraper). */
  metricsOpen: boolean;
  /** How other instances reach this one (docs/scaling.md abort forwarding); default: the listen address. */
  publicUrl: string | undefined;
  /**
   * Shared by every instance on one database: signs abort forwarding between them. Without it
   * (or without `publicUrl`) an abort reaches only this process's requests (docs/scaling.md).
   */
  peerSecret: string | undefined;
  /** Bounds on client connections (docs/deploy.md "Connection limits"). */
  connections: ConnectionLimits;
  /**
   * How long one admin read of a local file may run before it is stopped, in real ms (not
   * time-scaled: it bounds SQLite's work); docs/scaling.md "Admin reads". Default
   * ADMIN_QUERY_BOUND_MS.
   */
  adminQueryTimeoutMs?: number;
  /**
   * The nice value, 0–19, of the threads that write history to a local file and read it for the
   * admin page (docs/scaling.md "The database threads' priority"); 0 runs them at the serving
   * thread's priority. Default DB_THREAD_NICE.
   */
  dbThreadNice?: number;
}

/**
 * History is written and read for the admin page on spare CPU: a thread at nice 10 has about a
 * tenth of the serving thread's share of a busy core, so a batch being written or a month's cost
 * report being read no longer delays a caller's answer on a core they share (docs/scaling.md
 * "The database threads' priority").
 */
export const DB_THREAD_NICE = 10;

/** docs/deploy.md "Connection limits": how many client connections, and how long each may wait. */
export interface ConnectionLimits {
  /** Open client connections per process; beyond it a newcomer evicts a waiting one or gets 503. */
  max: number;
  /** From accept to the first request's complete headers (real ms: not time-scaled). */
  headersTimeoutMs: number;
  /** From the end of a response to the next request's headers (real ms: not time-scaled). */
  keepAliveTimeoutMs: number;
}

/** docs/deploy.md "Connection limits": the defaults and why. */
export const CONNECTION_DEFAULTS: ConnectionLimits = {
  max: 4096,
  headersTimeoutMs: 10_000,
  keepAliveTimeoutMs: 60_000,
};

export function readSettings(env: (name: string) => string | undefined): Settings {
  const port = Number(env("PULSEGATE_PORT") ?? "8080");
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`PULSEGATE_PORT must be a port number, got "${env("PULSEGATE_PORT")}"`);
  }
  const timeScale = Number(env("PULSEGATE_TIME_SCALE") ?? "1");
  if (!(timeScale > 0)) {
    throw new Error(
      `PULSEGATE_TIME_SCALE must be a positive number, got "${env("PULSEGATE_TIME_SCALE")}"`,
    );
  }
  return {
    // Deno Deploy ignores the listen address and serves the world: never assume loopback there.
    host: env("PULSEGATE_HOST") || (env("DENO_DEPLOYMENT_ID") ? "0.0.0.0" : "127.0.0.1"),
    port,
    configPath: env("PULSEGATE_CONFIG") || null,
    dbUrl: env("PULSEGATE_DB_URL") || "file:data/pulsegate.db",
    dbAuthToken: env("PULSEGATE_DB_AUTH_TOKEN") || undefined,
    adminToken: env("PULSEGATE_ADMIN_TOKEN") || undefined,
    timeScale,
    metricsOpen: env("PULSEGATE_METRICS_OPEN") === "1",
    publicUrl: withoutTrailingSlashes(env("PULSEGATE_PUBLIC_URL") ?? "") || undefined,
    peerSecret: env("PULSEGATE_PEER_SECRET") || undefined,
    connections: {
      max: positiveInteger(env, "PULSEGATE_MAX_CONNECTIONS", CONNECTION_DEFAULTS.max),
      headersTimeoutMs: positiveInteger(
        env,
        "PULSEGATE_HEADERS_TIMEOUT_MS",
        CONNECTION_DEFAULTS.headersTimeoutMs,
      ),
      keepAliveTimeoutMs: positiveInteger(
        env,
        "PULSEGATE_KEEP_ALIVE_TIMEOUT_MS",
        CONNECTION_DEFAULTS.keepAliveTimeoutMs,
      ),
    },
    adminQueryTimeoutMs: positiveInteger(
      env,
      "PULSEGATE_ADMIN_QUERY_TIMEOUT_MS",
      ADMIN_QUERY_BOUND_MS,
    ),
    dbThreadNice: wholeNumber(env, "PULSEGATE_DB_THREAD_NICE", {
      fallback: DB_THREAD_NICE,
      min: 0,
      max: 19,
    }),
  };
}

function positiveInteger(
  env: (name: string) => string | undefined,
  name: string,
  fallback: number,
): number {
  return wholeNumber(env, name, { fallback, min: 1 });
}

/** A whole number from `min` (to `max`) named by `name`, or `fallback` when unset or empty. */
function wholeNumber(
  env: (name: string) => string | undefined,
  name: string,
  opts: { fallback: number; min: number; max?: number },
): number {
  const raw = env(name);
  if (raw === undefined || raw === "") return opts.fallback;
  const value = Number(raw);
  const { min, max = Number.MAX_SAFE_INTEGER } = opts;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = opts.max === undefined ? `of at least ${min}` : `from ${min} to ${max}`;
    throw new Error(`${name} must be a whole number ${range}, got "${raw}"`);
  }
  return value;
}

export { isLoopback };
