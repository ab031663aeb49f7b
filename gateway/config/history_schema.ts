/**
 * How long history is kept (docs/scaling.md "Retention"). Kept apart from schema.ts so the
 * config schema gains one line.
 */
import { z } from "zod";

function days(max: number) {
  return z.int({ error: `must be a whole number of days between 1 and ${max}` })
    .min(1, { error: "must be at least 1" }).max(max, { error: `must be at most ${max}` });
}

export const HistorySchema = z.object({
  retention_days: days(3650).default(30).describe(
    "Days a request's row and its attempts are kept, counted from when the request started. " +
      "Older rows are removed in small batches every minute, except rows of requests still " +
      "running and rows an export destination has not received yet.",
  ),
  rollup_retention_days: days(36500).default(400).describe(
    "Days the per-minute rollups that trends and costs read are kept; they outlive the rows " +
      "they summarise, so the costs of past months stay after their rows are gone.",
  ),
}).strict();

export type HistoryConfig = z.output<typeof HistorySchema>;

/** The defaults, for a gateway with no config (safe mode). */
export const DEFAULT_HISTORY: HistoryConfig = HistorySchema.parse({});
