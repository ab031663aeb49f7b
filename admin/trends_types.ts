/**
 * The shapes of GET /admin/api/trends (docs/admin.md "Trends"), shared by the server and the
 * browser bundle; nothing here may import server code.
 */
import type { TrendBucket } from "../db/trend_queries.ts";

export type { TrendBucket };

export const TREND_WINDOW_NAMES = ["15m", "1h", "24h"] as const;
export type TrendWindow = typeof TREND_WINDOW_NAMES[number];

export interface TrendsView {
  window: TrendWindow;
  /** Start of the first bucket and end of the last, epoch ms. */
  from: number;
  to: number;
  bucketMs: number;
  route: string | null;
  upstream: string | null;
  buckets: TrendBucket[];
  /** What the filters offer: the configured routes and upstreams. */
  choices: { routes: string[]; upstreams: string[]; windows: TrendWindow[] };
}
