import type { History } from "./open_history.ts";

/** An error text on an unauthenticated endpoint stays one short line. */
const MAX_ERROR_CHARS = 200;

/**
 * Why history is not reaching the database right now, in one line; null while it is
 * (docs/deploy.md "Without a database, or while it is away"). The database is absent or away
 * (`DatabaseReadiness`), or it is there and its writes fail (a full disk, a lock held past the
 * busy timeout, a read-only file): the history writer's last write failed, and its rows wait
 * in memory until one succeeds.
 */
export function historyProblem(history: Pick<History, "readiness" | "writer">): string | null {
  const away = history.readiness.describe();
  if (away !== null) return away;
  const { failingSince, lastError } = history.writer.stats();
  if (failingSince === null) return null;
  const error = (lastError ?? "unknown error").slice(0, MAX_ERROR_CHARS);
  return `history writes failing since ${new Date(failingSince).toISOString()}: ${error}`;
}

/** The problem with the rows it puts at risk, for /readyz. */
export function historyAtRisk(history: Pick<History, "readiness" | "writer">): string | null {
  const problem = historyProblem(history);
  if (problem === null) return null;
  const { pending, capacity } = history.writer.stats();
  return `${problem}; ${pending} rows kept in memory (at most ${capacity}, the oldest dropped ` +
    "beyond)";
}
