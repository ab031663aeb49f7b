/**
 * The shape of GET /admin/api/history/retention (docs/admin.md "History"), shared by the server
 * and the browser bundle; nothing here may import server code.
 */
export interface RetentionView {
  /** `history.retention_days` and `history.rollup_retention_days` in force. */
  retentionDays: number;
  rollupRetentionDays: number;
  /** The start of the oldest request kept (epoch ms); null when history is empty. */
  oldestStartedAt: number | null;
  /** About how many requests are kept (no COUNT over millions of rows: the rowid span). */
  requestsApprox: number;
  /** The database file's size in bytes (its pages, the WAL aside), and of that what is free. */
  bytes: number;
  freeBytes: number;
  /** `incremental` gives freed pages back to the disk; `none` reuses them but never shrinks. */
  autoVacuum: "none" | "full" | "incremental";
  /** The last prune run, null before the first one ended. */
  lastPrune: {
    at: number;
    requests: number;
    attempts: number;
    /** Kept back past the window for an export destination not yet reached (epoch ms). */
    heldFrom: number | null;
  } | null;
  /** Requests removed since this process started. */
  removedTotal: number;
  /** Why the last run failed; null when it did not. */
  lastError: string | null;
}
