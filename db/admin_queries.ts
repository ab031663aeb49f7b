import { readerOf, type Reads } from "./read_db.ts";
import type { AttemptOutcome } from "./records.ts";
import { memberOrNull, numOrNull, text } from "./row_values.ts";
import { ATTEMPT_OUTCOMES } from "./history_rows.ts";

/** The parts of an attempt the admin page's upstream health needs. */
export interface AttemptSample {
  /** The model the attempt was sent: its member of the upstream (docs/admin.md "Upstream health"). */
  model: string;
  outcome: AttemptOutcome | null;
  status: number | null;
  firstContentMs: number | null;
  durationMs: number | null;
  outputTokens: number | null;
}

/**
 * Newest first along `attempts_upstream_started`, so the cost is the limit, not the table size.
 * Exported so tests can check the plan.
 */
export const RECENT_ATTEMPTS =
  `SELECT model, outcome, status, first_content_ms, duration_ms, output_tokens FROM attempts
  WHERE upstream = ? AND started_at >= ? ORDER BY started_at DESC LIMIT ?`;

/** Each upstream's latest attempts started at or after `since` (epoch ms), at most `limit`. */
export async function recentAttempts(
  db: Reads,
  opts: { upstreams: readonly string[]; since: number; limit: number },
): Promise<Map<string, AttemptSample[]>> {
  const samples = new Map<string, AttemptSample[]>();
  if (opts.upstreams.length === 0) return samples;
  // One read each rather than one batch: on a local file's reader they run two at a time, each
  // within its own bound (db/worker_reads.ts).
  const results = await Promise.all(
    opts.upstreams.map((upstream) =>
      readerOf(db).execute({ sql: RECENT_ATTEMPTS, args: [upstream, opts.since, opts.limit] })
    ),
  );
  opts.upstreams.forEach((upstream, i) => {
    const rows = results[i]?.rows ?? [];
    samples.set(
      upstream,
      rows.map((row) => ({
        model: text(row, "model"),
        outcome: memberOrNull(row, { column: "outcome", members: ATTEMPT_OUTCOMES }),
        status: numOrNull(row, "status"),
        firstContentMs: numOrNull(row, "first_content_ms"),
        durationMs: numOrNull(row, "duration_ms"),
        outputTokens: numOrNull(row, "output_tokens"),
      })),
    );
  });
  return samples;
}
