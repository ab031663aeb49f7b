import { workMs } from "../gateway/runtime/clock.ts";
import { type Db, writing } from "./client.ts";
import { num } from "./row_values.ts";

/**
 * Largest file turned to `auto_vacuum=INCREMENTAL` at start. The switch needs one VACUUM, which
 * rewrites the whole file under an exclusive lock (about a second per 100 MiB here, and as much
 * free disk again); past this size it is the operator's step, taken while the gateway is stopped
 * (docs/scaling.md "Retention"), so that no start waits minutes for it.
 */
export const AUTO_VACUUM_AT_START_MAX_BYTES = 64 * 1024 * 1024;

export type AutoVacuumAtStart =
  | { done: "already" }
  | { done: "vacuumed"; bytes: number; ms: number }
  | { done: "left"; bytes: number; reason: string };

/**
 * Gives a local file made before auto_vacuum was set (db/client.ts sets it on new files) the
 * incremental mode, when it is small enough to rewrite at start. Without it the pages retention
 * frees are reused by new rows, so the file stops growing, but it never shrinks.
 */
export async function autoVacuumAtStart(
  db: Db,
  opts: { maxBytes?: number; now?: () => number } = {},
): Promise<AutoVacuumAtStart> {
  const now = opts.now ?? workMs;
  const [mode, pages, size] = await db.client.batch(
    ["PRAGMA auto_vacuum", "PRAGMA page_count", "PRAGMA page_size"],
    "read",
  );
  const first = (rows: typeof mode) => rows?.rows[0];
  const modeRow = first(mode);
  if (modeRow && num(modeRow, "auto_vacuum") === 2) return { done: "already" };
  const pageRow = first(pages);
  const sizeRow = first(size);
  const bytes = (pageRow ? num(pageRow, "page_count") : 0) *
    (sizeRow ? num(sizeRow, "page_size") : 0);
  const max = opts.maxBytes ?? AUTO_VACUUM_AT_START_MAX_BYTES;
  if (bytes > max) {
    return { done: "left", bytes, reason: `the file is ${bytes} bytes, over ${max}` };
  }
  const started = now();
  // One connection for both: the mode is per connection until VACUUM writes it to the file.
  await writing(db, async (client) => {
    await client.executeMultiple("PRAGMA auto_vacuum=INCREMENTAL; VACUUM;");
  });
  return { done: "vacuumed", bytes, ms: now() - started };
}
