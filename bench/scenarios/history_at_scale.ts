/**
 * Scenario 7: history at scale (docs/scaling.md "History at scale"). A file of `requests`
 * requests over the last 28 days, shaped like the gateway's rows (bench/history_fill.ts), under a
 * pulsegate process of its own: every admin API the page calls (admin/client/api.ts) timed
 * against it, a proxied answer's p99 alone and while those calls run, and the bytes per request
 * on disk. The size comes from the profile, or `BENCH_HISTORY_REQUESTS`.
 */
import { openDatabase } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { num } from "../../db/row_values.ts";
import type { BenchContext } from "../context.ts";
import { fillHistory } from "../history_fill.ts";
import type { HistoryAtScaleResult } from "../results.ts";
import { startPulsegate } from "../stack.ts";
import { round, summarize } from "../stats.ts";
import { gatewayConfig } from "../targets.ts";

const DAY_MS = 86_400_000;

/** The admin calls the page makes, by name (admin/client/api.ts), as paths from `now`. */
function adminCalls(now: number, requestId: string): Record<string, string> {
  const month = now - 30 * DAY_MS;
  return {
    "requests page": "/admin/api/requests",
    "request detail": `/admin/api/requests/${encodeURIComponent(requestId)}`,
    "requests page, route filter": "/admin/api/requests?route=smart",
    "trends 24h": "/admin/api/trends?window=24h&route=&upstream=",
    "costs by route, 30 days": `/admin/api/costs?by=route&since=${month}`,
    "costs by key, 30 days": `/admin/api/costs?by=key&since=${month}`,
    "costs by upstream, 30 days": `/admin/api/costs?by=upstream&since=${month}`,
    "sessions": "/admin/api/sessions",
    "keys": "/admin/api/keys",
    "health": "/admin/api/health",
    "retention": "/admin/api/history/retention",
  };
}

async function timed(url: string): Promise<{ ms: number; status: number }> {
  const started = performance.now();
  const res = await fetch(url);
  await res.arrayBuffer();
  return { ms: performance.now() - started, status: res.status };
}

/** One proxied answer after another for `count` answers: their latencies. */
async function proxied(url: string, count: number): Promise<number[]> {
  const body = JSON.stringify({ model: "zero", messages: [{ role: "user", content: "hi" }] });
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    await res.arrayBuffer();
    times.push(performance.now() - started);
  }
  return times;
}

export async function historyAtScale(ctx: BenchContext): Promise<HistoryAtScaleResult> {
  const p = ctx.profile.historyAtScale;
  const requests = Number(Deno.env.get("BENCH_HISTORY_REQUESTS") ?? p.requests);
  const dir = `${ctx.workDir}/history_at_scale`;
  await Deno.mkdir(dir, { recursive: true });
  const now = Date.now();
  const db = await openDatabase(`file:${dir}/pulsegate.db`);
  let fillMs: number;
  let bytes: number;
  try {
    await migrate(db);
    ctx.log(`history at scale: filling ${requests} requests`);
    fillMs = await fillHistory(db, {
      requests,
      now: now - 60_000,
      days: 28, // inside the default 30-day window: the gateway's first prune removes nothing
      onChunk: (done) => {
        if (done % 1_000_000 === 0) ctx.log(`history at scale: ${done} requests`);
      },
    });
    const [pages, size] = await db.client.batch(["PRAGMA page_count", "PRAGMA page_size"]);
    bytes = num(pages!.rows[0]!, "page_count") * num(size!.rows[0]!, "page_size");
  } finally {
    db.close();
  }
  const fake = ctx.stack.endpoints.fake;
  const gw = await startPulsegate(ctx.layout, {
    name: "pulsegate_history_at_scale",
    dir,
    config: gatewayConfig({ fake, routes: { zero: "zero", smart: "zero" } }),
    history: true,
  });
  try {
    const base = gw.url;
    const page = await (await fetch(`${base}/admin/api/requests?limit=1`)).json() as {
      requests: { id: string }[];
    };
    const calls = adminCalls(Date.now(), page.requests[0]?.id ?? "none");
    const admin: HistoryAtScaleResult["admin"] = [];
    for (const [name, path] of Object.entries(calls)) {
      const runs: number[] = [];
      let status = 0;
      for (let i = 0; i < p.adminRepeats; i++) {
        const r = await timed(`${base}${path}`);
        runs.push(r.ms);
        status = r.status;
      }
      const s = summarize(runs);
      admin.push({ name, path, status, p50Ms: round(s.p50, 1), maxMs: round(s.max, 1) });
      ctx.log(`history at scale: ${name} ${round(s.p50, 1)} ms (status ${status})`);
    }
    await proxied(base, 20); // warm-up
    const alone = summarize(await proxied(base, p.proxied));
    // The same answers while the page's calls run back to back, as open tabs refreshing would.
    let stop = false;
    const paths = Object.values(calls);
    const hammer = (async () => {
      let calls = 0;
      while (!stop) {
        await timed(`${base}${paths[calls++ % paths.length]}`);
      }
      return calls;
    })();
    const during = summarize(await proxied(base, p.proxied));
    stop = true;
    const adminCallsDuring = await hammer;
    return {
      requests,
      fillSeconds: round(fillMs / 1000, 1),
      bytes,
      bytesPerRequest: Math.round(bytes / Math.max(1, requests)),
      admin,
      proxiedP99Ms: { alone: round(alone.p99, 2), duringAdmin: round(during.p99, 2) },
      proxiedP50Ms: { alone: round(alone.p50, 2), duringAdmin: round(during.p50, 2) },
      adminCallsDuring,
    };
  } finally {
    await gw.stop();
  }
}
