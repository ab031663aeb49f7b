/**
 * GET /admin/api/trends: history bucketed over a window for the page's charts (docs/admin.md
 * "Trends"). The buckets are aligned to their size, so a chart refreshed a moment later keeps
 * its bars where they were and only the last one grows.
 */
import { Hono } from "hono";
import type { Reads } from "../db/read_db.ts";
import { trendBuckets } from "../db/trend_queries.ts";
import type { Config } from "../gateway/config/schema.ts";
import { TREND_WINDOW_NAMES, type TrendsView, type TrendWindow } from "./trends_types.ts";

/** Each window's length and bucket size: 30, 60 and 96 bars. */
export const TREND_WINDOWS: Record<TrendWindow, { ms: number; bucketMs: number }> = {
  "15m": { ms: 15 * 60_000, bucketMs: 30_000 },
  "1h": { ms: 60 * 60_000, bucketMs: 60_000 },
  "24h": { ms: 24 * 60 * 60_000, bucketMs: 15 * 60_000 },
};

export interface TrendsDeps {
  /** Where history is read (the admin reader for a local file, db/worker_reads.ts). */
  db: Reads;
  now: () => number;
  config: () => Config | null;
}

export function trendsApi(deps: TrendsDeps): Hono {
  const app = new Hono();
  app.get("/admin/api/trends", async (c) => {
    const params = new URL(c.req.url).searchParams;
    const name = params.get("window") || "15m";
    const window = TREND_WINDOW_NAMES.find((w) => w === name);
    if (!window) {
      const message = `window must be one of ${TREND_WINDOW_NAMES.join(", ")}`;
      return c.json({ error: { code: "admin.bad_query", message } }, 400);
    }
    const { ms, bucketMs } = TREND_WINDOWS[window];
    const to = Math.ceil((deps.now() + 1) / bucketMs) * bucketMs;
    const from = to - ms;
    const route = params.get("route")?.trim() || undefined;
    const upstream = params.get("upstream")?.trim() || undefined;
    const buckets = await trendBuckets(deps.db, {
      from,
      bucketMs,
      buckets: ms / bucketMs,
      route,
      upstream,
    });
    const config = deps.config();
    const view: TrendsView = {
      window,
      from,
      to,
      bucketMs,
      route: route ?? null,
      upstream: upstream ?? null,
      buckets,
      choices: {
        routes: config?.routes.map((r) => r.model) ?? [],
        upstreams: config?.upstreams.map((u) => u.id) ?? [],
        windows: [...TREND_WINDOW_NAMES],
      },
    };
    return c.json(view);
  });
  return app;
}
