import type { TrendWindow } from "../../trends_types.ts";
import { formatMs } from "../format.ts";
import { perSecond, type Trends as TrendsModel } from "../trends_model.ts";
import { TrendChart } from "./trend_chart.tsx";

const WINDOW_LABELS: Record<TrendWindow, string> = {
  "15m": "last 15 min",
  "1h": "last hour",
  "24h": "last 24 h",
};

const rate = (v: number) => `${v < 10 ? v.toFixed(2) : v.toFixed(0)}/s`;
const count = (v: number) => String(Math.round(v));

/** Requests, first content, idle timeouts and failovers, and tokens over a chosen window. */
export function Trends({ trends }: { trends: TrendsModel }) {
  const view = trends.view.value;
  const f = trends.filters.value;
  const buckets = view?.buckets ?? [];
  const times = buckets.map((b) => b.at);
  const bucketMs = view?.bucketMs ?? 1;
  const per = (pick: (b: typeof buckets[number]) => number) =>
    buckets.map((b) => perSecond(pick(b), bucketMs));
  return (
    <section aria-labelledby="trends-title">
      <header class="panel-head">
        <h2 id="trends-title">Trends</h2>
        <button type="button" class="quiet" onClick={() => trends.refresh()}>Refresh</button>
      </header>
      <form class="filters" aria-label="Trend filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Window
          <select
            name="trend-window"
            value={f.window}
            onChange={(e) => trends.choose({ window: e.currentTarget.value as TrendWindow })}
          >
            {(view?.choices.windows ?? ["15m", "1h", "24h"]).map((w) => (
              <option key={w} value={w}>{WINDOW_LABELS[w]}</option>
            ))}
          </select>
        </label>
        <label>
          Route
          <select
            name="trend-route"
            value={f.route}
            onChange={(e) => trends.choose({ route: e.currentTarget.value })}
          >
            <option value="">any</option>
            {view?.choices.routes.map((r) => <option key={r} value={r}>{r}</option>)}
          </select>
        </label>
        <label>
          Upstream
          <select
            name="trend-upstream"
            value={f.upstream}
            onChange={(e) => trends.choose({ upstream: e.currentTarget.value })}
          >
            <option value="">any</option>
            {view?.choices.upstreams.map((u) => <option key={u} value={u}>{u}</option>)}
          </select>
        </label>
      </form>
      {trends.error.value && <p class="notice error" role="alert">{trends.error.value}</p>}
      {view && (
        <div class="charts">
          <TrendChart
            title="Requests/s by outcome"
            kind="bars"
            times={times}
            bucketMs={bucketMs}
            format={rate}
            series={[
              { name: "success", cls: "s-ok", values: per((b) => b.success) },
              { name: "error", cls: "s-bad", values: per((b) => b.error) },
              { name: "aborted", cls: "s-warn", values: per((b) => b.aborted) },
              {
                name: "client disconnected",
                cls: "s-muted",
                values: per((b) => b.clientDisconnected),
              },
            ]}
          />
          <TrendChart
            title="Time to first content"
            kind="lines"
            times={times}
            bucketMs={bucketMs}
            format={formatMs}
            series={[
              { name: "p50", cls: "s-ok", values: buckets.map((b) => b.firstContentP50Ms) },
              { name: "p95", cls: "s-warn", values: buckets.map((b) => b.firstContentP95Ms) },
            ]}
          />
          <TrendChart
            title="Idle timeouts and failovers"
            kind="bars"
            times={times}
            bucketMs={bucketMs}
            format={count}
            series={[
              { name: "idle timeouts", cls: "s-bad", values: buckets.map((b) => b.idleTimeouts) },
              { name: "failovers", cls: "s-warn", values: buckets.map((b) => b.failovers) },
            ]}
          />
          <TrendChart
            title="Output tokens/s"
            kind="bars"
            times={times}
            bucketMs={bucketMs}
            format={rate}
            series={[{
              name: "output tokens",
              cls: "s-accent",
              values: per((b) => b.outputTokens),
            }]}
          />
        </div>
      )}
    </section>
  );
}
